"""Families of tests and intervals: name what is read together, correct for it, and say so.

A reader who scans 40 heads for one above chance, or 30 intervals for one that excludes zero, needs the error
rate of the whole scan, not of each line. :func:`correct_tests` applies Holm's step-down correction (Holm 1979:
it controls the family-wise error rate like Bonferroni and rejects at least as often); :func:`correct_intervals`
computes each interval at the Bonferroni-adjusted level ``1 - alpha / m``, so that all ``m`` hold together with
probability ``1 - alpha``. Both return a :class:`Correction` holding the family's description, its size, the
method and what it changed, so a report can print one line about it (:attr:`Correction.label`). Holm is written
here: ``scipy.stats`` has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from interp.analysis.stats.results import Interval, _percent


@dataclass(frozen=True)
class Correction:
    """A family and its correction.

    Attributes:
        family: what the family is, in words ("every head tested, by query position and measure").
        method: ``"holm"`` (tests) or ``"bonferroni"`` (intervals).
        size: how many members the family has.
        alpha: the family-wise error rate held.
        p_values: the tests' p-values as computed (Holm).
        adjusted: their Holm-adjusted values, in the same order; a member is rejected where it is at most
            ``alpha``.
        intervals: the intervals, each at :attr:`each_level` (Bonferroni).
    """

    family: str
    method: Literal["holm", "bonferroni"]
    size: int
    alpha: float
    p_values: tuple[float, ...] = ()
    adjusted: tuple[float, ...] = ()
    intervals: tuple[Interval, ...] = ()

    @property
    def rejected(self) -> tuple[bool, ...]:
        """Per test, whether the corrected test rejects at ``alpha``."""
        return tuple(p <= self.alpha for p in self.adjusted)

    @property
    def each_level(self) -> float:
        """The confidence level of each member's interval: ``1 - alpha / size`` (Bonferroni), or ``1 -
        alpha`` for a family of one or none."""
        return 1 - self.alpha / max(1, self.size)

    @property
    def label(self) -> str:
        """One line for a caption.

        >>> correct_tests("every head tested", [0.001, 0.02, 0.4]).label
        'Holm over 3 tests (every head tested), family-wise error 0.05: 2 of 3 rejected'
        """
        if self.method == "holm":
            return (
                f"Holm over {self.size} tests ({self.family}), family-wise error {self.alpha:g}: "
                f"{sum(self.rejected)} of {self.size} rejected"
            )
        return (
            f"Bonferroni over {self.size} intervals ({self.family}): each at {_percent(self.each_level)}, so "
            f"that all hold together with probability {_percent(1 - self.alpha)}"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["intervals"] = [i.to_json() for i in self.intervals]
        out.update(rejected=list(self.rejected), each_level=self.each_level, label=self.label)
        return out


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    The i-th smallest of m p-values is multiplied by m - i + 1 (i from 1), each adjusted value is at least
    the one before it in that order, and none exceeds 1; reject where the adjusted value is at most the level.

    >>> [round(p, 6) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]

    Raises:
        ValueError: A p-value is not in [0, 1].
    """
    bad = [p for p in p_values if not 0 <= p <= 1]
    if bad:
        raise ValueError(f"p-values must lie in [0, 1], got {bad[:5]}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def correct_tests(family: str, p_values: Sequence[float], alpha: float = 0.05) -> Correction:
    """Holm's correction over the ``family`` of tests whose p-values are given.

    Raises:
        ValueError: ``family`` is empty, a p-value is not in [0, 1], or ``alpha`` is not between 0 and 1.
    """
    _check(family, alpha)
    p = tuple(float(v) for v in p_values)
    return Correction(family, "holm", len(p), alpha, p, tuple(holm(p)))


def correct_intervals(
    family: str, intervals: Sequence[Callable[[float], Interval]], alpha: float = 0.05
) -> Correction:
    """Bonferroni's correction over a ``family`` of intervals: each member computed at ``1 - alpha / m``.

    ``intervals`` holds, per member, a function of the level that computes it, such as
    ``functools.partial(group_interval, values, groups)`` called as ``f(level=...)``.

    >>> from functools import partial
    >>> from interp.analysis.stats import group_interval
    >>> found = correct_intervals("two means", [partial(group_interval, [1.0, 2.0, 4.0]),
    ...                                         partial(group_interval, [0.5, 0.7, 0.4])])
    >>> found.each_level, [i.level for i in found.intervals]
    (0.975, [0.975, 0.975])

    Raises:
        ValueError: ``family`` is empty or ``alpha`` is not between 0 and 1.
    """
    _check(family, alpha)
    each = 1 - alpha / max(1, len(intervals))
    return Correction(
        family, "bonferroni", len(intervals), alpha, intervals=tuple(f(level=each) for f in intervals)
    )


def _check(family: str, alpha: float) -> None:
    if not family.strip():
        raise ValueError("family=''; say what the family is (what a reader scans), e.g. 'every head tested'")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha}; give a family-wise error rate between 0 and 1, such as 0.05")
