"""Switch sensitivity and bias: what a twin pair says about a model, kept apart from "right in both twins".

Twins differ in one word (the *switch*: "tired" / "wide"; "Emma" / "Jack") that moves the expected answer from
one label to the other (the animal to the street; " she" to " he"). In each twin the model has a *preference*:
its score for label 0 minus its score for label 1 (log-probabilities, logits, attention scores), written in the
same direction in both twins. A pair then has two numbers:

- **sensitivity**: the preference for twin a's expected answer in twin a minus the same preference in twin b,
  ``(animal - street | tired) - (animal - street | wide)``. Positive when the switch word moves the model toward
  the expected answer, whatever it prefers in both twins.
- **bias**: the preference for label 0 averaged over the two twins: what the model prefers whichever twin it
  reads.

With ``m_a`` and ``m_b`` each twin's margin for its own expected answer (positive: right), the sensitivity is
``m_a + m_b`` and the bias toward twin a's answer is ``(m_a - m_b) / 2``, so ``m_a = s / 2 + b_a`` and
``m_b = s / 2 - b_a``: a pair is right in both twins exactly when half its sensitivity exceeds the size of its
bias. A model that prefers one label by more than that is right in no pair however strongly the switch word
moves it, which is why "right in both twins" cannot be the primary measure: it mixes the two numbers.

Across pairs (:func:`summarise`): the sensitivity by
:func:`~interp.analysis.stats.twin_difference_test` (sign flips over pairs: with no effect of the switch word,
which twin is subtracted from which is arbitrary, so each difference's sign is a coin flip) with the interval
that inverts it; the bias by sign flips at 0 with its interval (the same test, read for a preference that does
not depend on the twin); "right in both twins" as a count against the 0.25 that two independent fair signs give
(exact binomial test, each pair one trial). Verdicts (:meth:`SwitchSummary.verdict`) are worded from the
first two numbers, with the count after them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from interp.analysis.stats import (
    Comparison,
    binomial_test,
    sign_flip_interval,
    sign_flip_test,
    twin_difference_test,
    wilson_interval,
)

BOTH_CHANCE = 0.25
"""The fraction of pairs right in both twins when each twin's preference has an independent fair sign."""


@dataclass(frozen=True)
class SwitchPair:
    """One twin pair's numbers (see the module's description).

    Attributes:
        sensitivity: the preference for twin a's expected answer in twin a minus that in twin b.
        bias: the preference for label 0, averaged over both twins.
        right_both: whether each twin prefers its own expected answer (``sensitivity / 2 > |bias|``).
    """

    sensitivity: float
    bias: float
    right_both: bool


def switch_pair(preference_a: float, preference_b: float, answer_a: int) -> SwitchPair:
    """A pair's sensitivity, bias and whether it is right in both twins.

    Args:
        preference_a, preference_b: each twin's score for label 0 minus its score for label 1, in one direction
            for both twins (" she" − " he"; the first candidate minus the second).
        answer_a: the label twin a expects (0 or 1); twin b expects the other.

    >>> switch_pair(7.89, 7.37, 0)  # the seed's pair: animal - street after "tired" and after "wide"
    SwitchPair(sensitivity=0.5199999999999996, bias=7.63, right_both=False)
    >>> switch_pair(-1.0, 2.0, 1)  # a she/he pair, twin a masculine: right in both
    SwitchPair(sensitivity=3.0, bias=0.5, right_both=True)

    Raises:
        ValueError: ``answer_a`` is not 0 or 1, or a preference is not finite.
    """
    if answer_a not in (0, 1):
        raise ValueError(f"answer_a={answer_a!r}; give the label twin a expects, 0 or 1")
    if not (math.isfinite(preference_a) and math.isfinite(preference_b)):
        raise ValueError(f"preferences ({preference_a}, {preference_b}) must be finite numbers")
    sign = 1.0 if answer_a == 0 else -1.0  # toward twin a's answer
    margin_a, margin_b = sign * preference_a, -sign * preference_b  # each twin toward its own answer
    return SwitchPair(
        float(margin_a + margin_b), float((preference_a + preference_b) / 2), margin_a > 0 and margin_b > 0
    )


def switch_from_margins(margin_a: float, margin_b: float, answer_a: int) -> SwitchPair:
    """:func:`switch_pair` from each twin's margin for its *own* expected answer (positive: right), as studies
    that sign every twin toward its referent hold them; ``answer_a`` orients the bias toward label 0.

    >>> switch_from_margins(7.89, -7.37, 0) == switch_pair(7.89, 7.37, 0)
    True
    """
    sign = 1.0 if answer_a == 0 else -1.0
    return switch_pair(sign * margin_a, -sign * margin_b, answer_a)


@dataclass(frozen=True)
class SwitchSummary:
    """Sensitivity, bias and right-in-both over a set of twin pairs.

    Attributes:
        n_pairs: the pairs summarised.
        sensitivity: the sign-flip test of the mean sensitivity against 0, with its interval.
        bias: the sign-flip test of the mean bias toward label 0 against 0, with its interval.
        mean_abs_bias: the mean size of the bias, whatever its direction: the preference the switch word has to
            overcome in a typical pair.
        sensitive: pairs whose sensitivity is positive (the switch word moves them the expected way).
        right_both: pairs right in both twins; ``right_both_ci`` its Wilson interval over pairs.
        right_both_p: the exact binomial test of that count against :data:`BOTH_CHANCE` (two-sided).
        labels: labels 0 and 1 as they read in a sentence (``('"she"', '"he"')``, ``("the first candidate",
            "the second")``).
        unit: what the preferences are measured in (``"logits"``, ``"nats"``, ``"score units"``).
    """

    n_pairs: int
    sensitivity: Comparison
    bias: Comparison
    mean_abs_bias: float
    sensitive: int
    right_both: int
    right_both_ci: tuple[float, float]
    right_both_p: float
    labels: tuple[str, str]
    unit: str
    chance: float = BOTH_CHANCE

    @property
    def shown(self) -> bool:
        """Whether the sensitivity's interval lies above 0 (the switch word moves the model as expected)."""
        interval = self.sensitivity.interval
        return interval is not None and interval.low > 0

    def verdict(self, subject: str = "the model") -> str:
        """Sentences that state the finding from the sensitivity and the bias, then the count.

        >>> s = summarise([switch_pair(3.0, 2.1, 0), switch_pair(-2.0, -1.2, 1), switch_pair(1.5, 0.9, 0),
        ...                switch_pair(-0.2, 1.1, 1), switch_pair(4.0, 3.1, 0), switch_pair(-0.2, 0.3, 1)],
        ...               labels=('"she"', '"he"'), unit="logits")
        >>> print(s.verdict())  # doctest: +NORMALIZE_WHITESPACE
        The model is sensitive to the switch word: the twin difference is +0.83 [+0.50, +1.30] logits toward the
        expected answer (p = 0.031 by sign flips over 6 twin pairs; 0 is no sensitivity), 6 of 6 pairs positive.
        No bias shown toward either label: +1.03 [-1.60, +3.55] logits toward "she" over "he" (p = 0.22); its
        size is 1.57 on average. Right in both twins (secondary: it needs half the sensitivity to exceed the
        bias): 2 of 6 pairs, 0.33 [0.10, 0.70] (chance 0.25, exact binomial p = 0.64).
        """
        return " ".join(_sentences(self, subject))

    def to_json(self) -> dict[str, Any]:
        return {
            "n_pairs": self.n_pairs,
            "sensitivity": self.sensitivity.to_json(),
            "bias": self.bias.to_json(),
            "mean_abs_bias": self.mean_abs_bias,
            "sensitive": self.sensitive,
            "right_both": self.right_both,
            "right_both_fraction": self.right_both / self.n_pairs if self.n_pairs else math.nan,
            "right_both_ci": list(self.right_both_ci),
            "right_both_p": self.right_both_p,
            "chance": self.chance,
            "labels": list(self.labels),
            "unit": self.unit,
            "verdict": self.verdict(),
        }


def summarise(
    pairs: Sequence[SwitchPair],
    groups: Sequence | np.ndarray | None = None,
    *,
    labels: tuple[str, str] = ("label 0", "label 1"),
    unit: str = "logits",
    level: float = 0.95,
    seed: int = 0,
) -> SwitchSummary:
    """Sensitivity, bias and right-in-both over ``pairs`` (see the module's description).

    ``groups`` joins pairs that are not independent (several pairs of one schema): the sign flips then flip
    whole groups. The right-in-both count treats each pair as one trial.

    Raises:
        ValueError: ``pairs`` is empty, or ``groups`` does not give one label per pair.
    """
    if not pairs:
        raise ValueError("no twin pairs to summarise; switch sensitivity needs at least one pair")
    if groups is not None and len(groups) != len(pairs):
        raise ValueError(f"groups has {len(groups)} labels for {len(pairs)} pairs; give one per pair")
    if groups is not None and len(set(map(str, groups))) == len(groups):
        groups = None  # one pair per group: the same test, counted in pairs
    sens = np.array([p.sensitivity for p in pairs])  # [pair]
    bias = np.array([p.bias for p in pairs])
    both = sum(p.right_both for p in pairs)
    n = len(pairs)
    interval = sign_flip_interval(bias, groups, level=level, seed=seed)
    units = interval.n_groups
    bias_test = Comparison(
        interval.mean,
        sign_flip_test(bias, 0.0, groups=groups, seed=seed),
        units,
        units <= 16,
        f"sign flips over {units} {'twin pairs' if groups is None else 'groups of twin pairs'}",
        interval,
    )
    return SwitchSummary(
        n_pairs=n,
        sensitivity=twin_difference_test(sens, groups, level=level, seed=seed),
        bias=bias_test,
        mean_abs_bias=float(np.abs(bias).mean()),
        sensitive=int((sens > 0).sum()),
        right_both=int(both),
        right_both_ci=wilson_interval(int(both), n),
        right_both_p=binomial_test(int(both), n, BOTH_CHANCE),
        labels=labels,
        unit=unit,
    )


def _signed(x: float) -> str:
    return f"{x:+.2f}" if math.isfinite(x) else ("+inf" if x > 0 else "-inf")


def _interval(c: Comparison) -> str:
    i = c.interval
    return (
        f"{_signed(c.estimate)} [{_signed(i.low)}, {_signed(i.high)}]"
        if i is not None
        else _signed(c.estimate)
    )


def _sentences(s: SwitchSummary, subject: str) -> list[str]:
    who = subject[:1].upper() + subject[1:]
    sens, bias = s.sensitivity, s.bias
    if s.n_pairs == 1:
        pair_words = "one twin pair: numbers, no test"
        return [
            f"{who} moves {_signed(sens.estimate)} {s.unit} toward the expected answer between the twins "
            f"(switch sensitivity; {pair_words}), with a bias of {_signed(bias.estimate)} toward {s.labels[0]} "
            f"over {s.labels[1]} (the mean preference over both twins); right in both twins: "
            f"{'yes' if s.right_both else 'no'} (chance {s.chance:g}).",
        ]
    low, high = sens.interval.low, sens.interval.high  # type: ignore[union-attr]
    where = (
        "is sensitive to the switch word"
        if low > 0
        else "moves against the switch word"
        if high < 0
        else "shows no sensitivity to the switch word that these pairs can detect"
    )
    out = [
        f"{who} {where}: the twin difference is {_interval(sens)} {s.unit} toward the expected answer "
        f"(p = {sens.p_value:.2g} by {sens.method}; 0 is no sensitivity), {s.sensitive} of {s.n_pairs} pairs "
        "positive."
    ]
    b_low, b_high = bias.interval.low, bias.interval.high  # type: ignore[union-attr]
    toward = s.labels[0] if bias.estimate > 0 else s.labels[1]
    if b_low > 0 or b_high < 0:
        out.append(
            f"On top of it, a bias toward {toward}: {_interval(bias)} {s.unit} toward {s.labels[0]} over "
            f"{s.labels[1]}, the mean preference over both twins (p = {bias.p_value:.2g}); the bias is "
            f"{s.mean_abs_bias:.2f} in size on average, against half the sensitivity, "
            f"{sens.estimate / 2:.2f}."
        )
    else:
        out.append(
            f"No bias shown toward either label: {_interval(bias)} {s.unit} toward {s.labels[0]} over "
            f"{s.labels[1]} (p = {bias.p_value:.2g}); its size is {s.mean_abs_bias:.2f} on average."
        )
    out.append(
        f"Right in both twins (secondary: it needs half the sensitivity to exceed the bias): {s.right_both} of "
        f"{s.n_pairs} pairs, {s.right_both / s.n_pairs:.2f} [{s.right_both_ci[0]:.2f}, {s.right_both_ci[1]:.2f}] "
        f"(chance {s.chance:g}, exact binomial p = {s.right_both_p:.2g})."
    )
    return out
