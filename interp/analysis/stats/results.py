"""What an interval or a test returns: the numbers, and how they were got, so a report can say both.

An :class:`Interval` carries its method, its level, how many independent groups it rests on and whether it is
*exploratory*: a method whose coverage falls short of its level at that many groups (a bootstrap over fewer
than :data:`MIN_GROUPS`), printed as such by :attr:`Interval.label`. A :class:`Comparison` is a test's estimate,
p-value and units, with the interval that matches the test where there is one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, Literal

MIN_GROUPS = 10
"""Below this many independent groups a bootstrap interval covers clearly less than its level. On twin pairs
with normal group effects (``tests/analysis/test_stats_calibration.py``) a 95% percentile bootstrap covered 82%
of 500 simulated data sets over 6 groups and 90% over 12, where the t-interval covered 95% of 1,500 at both
(BCa, on normal means: 85% and 90%). Bootstraps over fewer groups are marked exploratory, and
:func:`~interp.analysis.stats.bootstrap_mean_interval` gives the t-interval there. The shortfall does not end
at 10 (about 93% at 20 to 50 groups), which is why :func:`~interp.analysis.stats.group_interval` uses the
t-interval at every size unless told otherwise."""

Method = Literal["t", "bca", "percentile", "sign-flip", "none"]

_METHOD_WORDS = {
    "t": "t-interval",
    "bca": "BCa bootstrap",
    "percentile": "percentile bootstrap",
    "sign-flip": "sign-flip interval (the inverted sign-flip test)",
    "none": "no interval",
}


@dataclass(frozen=True)
class Interval:
    """A mean and its confidence interval over ``n_groups`` independent groups.

    Iterating gives ``(mean, low, high)``, so ``mean, low, high = interval`` reads as it did for the tuples the
    older functions return. ``low`` and ``high`` are NaN with fewer than two groups, and may be infinite for a
    sign-flip interval over so few groups that no value can be rejected at the level asked.

    Attributes:
        mean: the estimate (the pooled mean of the values, ``sum(w * x) / sum(w)`` with weights).
        low, high: the interval's ends.
        level: its nominal coverage, e.g. 0.95.
        method: how it was computed (``"t"``, ``"bca"``, ``"percentile"``, ``"sign-flip"``, ``"none"``).
        n_groups: the independent units it resamples or counts (schemas, twin pairs, or single values).
        exploratory: True where the method's coverage falls short of ``level`` at this many groups (a bootstrap
            over fewer than :data:`MIN_GROUPS`) or there is no interval at all: read it as a description of
            the data at hand, not as evidence.
    """

    mean: float
    low: float
    high: float
    level: float
    method: Method
    n_groups: int
    exploratory: bool = False

    def __iter__(self) -> Iterator[float]:
        return iter((self.mean, self.low, self.high))

    def excludes(self, value: float) -> bool:
        """Whether ``value`` lies outside the interval (False when there is no interval)."""
        return bool(value < self.low or value > self.high)

    @property
    def label(self) -> str:
        """How it was computed, for a caption: ``95% t-interval over 6 groups``; with ``exploratory:`` first
        where it is.

        >>> Interval(0.6, 0.5, 0.7, 0.95, "percentile", 6, exploratory=True).label
        'exploratory: 95% percentile bootstrap over 6 groups (below 10 its coverage falls short of 95%)'
        """
        if self.method == "none" or math.isnan(self.low):
            return f"no interval: {self.n_groups} group{'s' if self.n_groups != 1 else ''}, two are needed"
        text = f"{_percent(self.level)} {_METHOD_WORDS[self.method]} over {self.n_groups} groups"
        if self.exploratory:
            text = (
                f"exploratory: {text} (below {MIN_GROUPS} its coverage falls short of {_percent(self.level)})"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON values, the ends as ``ci`` (``null`` for NaN, strings for infinities)."""
        out = asdict(self)
        out["ci"] = [_json_float(self.low), _json_float(self.high)]
        del out["low"], out["high"]
        out["label"] = self.label
        return out


@dataclass(frozen=True)
class Comparison:
    """A test's outcome.

    Attributes:
        estimate: what was tested against its null (a mean difference, a difference of means).
        p_value: two-sided unless the call said otherwise.
        n_units: the independent units the test counts (groups: twin pairs, schemas).
        exact: whether the p-value is exact (every sign flip or relabelling counted) or estimated from seeded
            random draws.
        method: the test, in words.
        interval: the interval that matches the test (it excludes the null exactly when ``p_value <= 1 -
            level``), where the test has one.
    """

    estimate: float
    p_value: float
    n_units: int
    exact: bool
    method: str
    interval: Interval | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["interval"] = None if self.interval is None else self.interval.to_json()
        return out


def _percent(level: float) -> str:
    return f"{100 * level:.4g}%"


def _json_float(value: float) -> float | str | None:
    if math.isnan(value):
        return None
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")
