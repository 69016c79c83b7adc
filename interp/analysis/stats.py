"""Intervals, tests and corrections: the statistics studies report next to their numbers.

Most of a study's accuracies are counts of successes out of trials, so three tools cover them: the
Wilson score interval of a proportion (Wilson 1927; it stays inside [0, 1] and keeps close to its nominal
coverage at small n and near 0 or 1, where the normal interval does not), the exact binomial test, and the
Holm-Bonferroni step-down correction for testing several heads at once (Holm 1979; it controls the
family-wise error rate like Bonferroni and rejects at least as often). Means of measurements get a normal
interval (:func:`mean_interval`) or a percentile bootstrap (:func:`bootstrap_mean_interval`).

The binomial test and the Wilson interval count every trial as independent. Where trials come in groups that
are not (the twins of one schema, which share every token before the switch word), the bootstrap resamples
whole groups and :func:`sign_flip_test` tests a mean against a chance level by flipping the sign of each
group's deviation, so the evidence counts groups, not trials.

They are written here rather than taken from ``scipy.stats`` (``binomtest``, its
``proportion_ci(method="wilson")``; Holm is not in scipy), which would make scipy a runtime dependency for
a dozen lines: the binomial test sums the probabilities in exact integer arithmetic, so its p-value is the
exact one rounded once, and which outcomes count as "no more likely than the observed one" is decided
exactly rather than within a tolerance. The tests check all three against ``scipy.stats`` (a test
dependency) and against direct computations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Literal

import numpy as np


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` trials; 95% with the default ``z``.

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]

    Raises:
        ValueError: ``n`` is not positive or ``successes`` is not in ``0..n``.
    """
    _check_counts(successes, n)
    p = successes / n
    denom = 1 + z**2 / n
    centre = (p + z**2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exactly 0 and 1 at the ends, without rounding
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def binomial_test(
    successes: int,
    n: int,
    p: float = 0.5,
    *,
    alternative: Literal["two-sided", "greater", "less"] = "two-sided",
) -> float:
    """The exact binomial test's p-value for ``successes`` out of ``n`` against success probability ``p``.

    Two-sided, it is the probability of every outcome no more likely than the one observed (the rule
    ``scipy.stats.binomtest`` uses); ``"greater"`` is P(X >= successes), ``"less"`` is P(X <= successes).
    With no trials it is 1.

    >>> round(binomial_test(9, 10), 4)
    0.0215
    >>> round(binomial_test(9, 10, alternative="greater"), 5)
    0.01074

    Raises:
        ValueError: ``n`` is negative, ``successes`` is not in ``0..n``, ``p`` is not strictly between 0
            and 1, or ``alternative`` is not one of the three.
    """
    if n == 0 and successes == 0:
        return 1.0
    _check_counts(successes, n)
    if not 0 < p < 1:
        raise ValueError(f"p={p}; the success probability must be strictly between 0 and 1")
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative={alternative!r}; use 'two-sided', 'greater' or 'less'")
    # P(X = i) = C(n, i) a^i b^(n - i) / d^n with p = a / d exactly (a float is a binary fraction), so
    # integer weights compare and sum the probabilities without rounding.
    ratio = Fraction(p)
    a, d = ratio.numerator, ratio.denominator
    b = d - a
    weights = [math.comb(n, i) * a**i * b ** (n - i) for i in range(n + 1)]
    if alternative == "greater":
        tail = sum(weights[successes:])
    elif alternative == "less":
        tail = sum(weights[: successes + 1])
    else:
        observed = weights[successes]
        tail = sum(w for w in weights if w <= observed)
    return float(min(Fraction(1), Fraction(tail, d**n)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    The i-th smallest of m p-values is multiplied by m - i + 1 (i from 1), each adjusted value is at least
    the one before it in that order, and none exceeds 1; reject where the adjusted value is below the level.

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


def _floats(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A 1-d float array; float32 input stays float32, so its means are the ones float32 arithmetic gives."""
    x = np.asarray(values)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"values must be a non-empty 1-d sequence, got shape {x.shape}")
    return x


def _check_counts(successes: int, n: int) -> None:
    if n <= 0:
        raise ValueError(f"n={n}; a confidence interval or test needs at least one trial")
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} is not between 0 and n={n}")


def mean_interval(values: Sequence[float] | np.ndarray, z: float = 1.96) -> tuple[float, float, float]:
    """The mean and its normal-approximation interval, ``mean -+ z * sd / sqrt(n)``; 95% by default.

    With fewer than two values the interval is ``(nan, nan)``: one value says nothing about its spread.

    >>> [round(v, 4) for v in mean_interval([1.0, 2.0, 3.0, 4.0])]
    [2.5, 1.2348, 3.7652]
    """
    x = _floats(values)
    mean = float(np.mean(x))
    half = z * float(np.std(x, ddof=1)) / math.sqrt(len(x)) if len(x) > 1 else float("nan")
    return mean, mean - half, mean + half


def bootstrap_mean_interval(
    values: Sequence[float] | np.ndarray,
    n_boot: int,
    seed: int,
    level: float = 0.95,
    *,
    groups: Sequence | np.ndarray | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
) -> tuple[float, float, float]:
    """The mean and its percentile bootstrap interval: ``n_boot`` resamples with replacement, seeded.

    With ``groups`` (one label per value) a resample draws whole groups: values that are not independent
    (the twins of one schema, the rows of one prompt) stay together, so the interval is as wide as the
    number of groups, not of values, warrants. A resample's mean is then its values' sum over their count.

    With ``weights`` (one non-negative weight per value) the mean is ``sum(w * x) / sum(w)``, and so is each
    resample's: a pooled ratio such as a share of summed totals (``x = part / total``, ``w = total``) gets its
    interval this way. Without ``groups``, each value is then its own group.

    >>> mean, low, high = bootstrap_mean_interval([0.0, 1.0] * 20, n_boot=200, seed=0)
    >>> mean, low < 0.5 < high
    (0.5, True)
    >>> bootstrap_mean_interval([0.0, 1.0] * 20, n_boot=200, seed=0, groups=[0, 0] * 20)[1:]
    (0.5, 0.5)
    >>> bootstrap_mean_interval([1.0, 0.0], n_boot=10, seed=0, weights=[3.0, 1.0])[0]
    0.75
    """
    x = _floats(values)
    if n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"n_boot={n_boot}, level={level}; give n_boot >= 1 and a level between 0 and 1")
    rng = np.random.default_rng(seed)
    if groups is None and weights is None:
        means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(1)  # [resample]
        mean = float(x.mean())
    else:
        w = np.ones(len(x)) if weights is None else _weights(weights, x)
        labels = np.arange(len(x)) if groups is None else groups
        means = _group_resample_means(x, w, labels, n_boot, rng)
        mean = float(x.mean()) if weights is None else float((w * x).sum() / w.sum())
    tail = round(50 * (1 - level), 10)  # percent in each tail: 2.5 exactly for a 95% interval
    low, high = np.percentile(means, [tail, 100 - tail])
    return mean, float(low), float(high)


def sign_flip_test(
    values: Sequence[float] | np.ndarray,
    null: float,
    *,
    groups: Sequence | np.ndarray | None = None,
    n_flips: int = 20_000,
    seed: int = 0,
) -> float:
    """Two-sided p-value that the mean of ``values`` is ``null``, by flipping the signs of whole groups.

    Each group's summed deviation from ``null`` (``sum(x - null)`` over its values) is a unit; under the null
    hypothesis each unit is as likely positive as negative, so the test statistic ``|sum of units|`` is
    compared with its distribution under random sign flips of the units (a randomisation test, valid however
    the values inside a group depend on each other). The p-value is exact when there are at most 16 groups
    (every one of the ``2**groups`` flips is counted) or when every unit is a whole multiple of ``1 / d`` for a
    ``d`` up to 64 (right-or-wrong values against a chance level such as 0.5 or 0.25: the distribution of the
    flipped sum is then a convolution over whole numbers); otherwise ``n_flips`` seeded random flips estimate it
    as ``(1 + hits) / (1 + n_flips)``, which never falls below the exact value's expectation. Without ``groups``
    each value is its own group. Binary values against a chance level are the common use: twins of one schema
    then count once, as one unit of two trials.

    >>> sign_flip_test([1.0, 1.0, 1.0, 1.0, 1.0], 0.5)  # 2 of the 32 flips are as extreme: 1/16
    0.0625
    >>> sign_flip_test([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 0.5, groups=[0, 0, 1, 1, 2, 2])  # three units: 1/4
    0.25

    Raises:
        ValueError: ``values`` is empty or not finite, ``groups`` does not give one label per value, or
            ``n_flips`` is below 1.
    """
    x = _floats(values)
    if not np.isfinite(x).all():
        raise ValueError(f"values hold {int((~np.isfinite(x)).sum())} NaN or infinite entries; drop them")
    if n_flips < 1:
        raise ValueError(f"n_flips={n_flips}; give at least 1")
    labels = np.arange(len(x)) if groups is None else np.asarray(groups)
    if labels.shape != x.shape:
        raise ValueError(
            f"groups has shape {labels.shape} but values {x.shape}; give one group label per value"
        )
    index = np.unique(labels, return_inverse=True)[1].reshape(-1)
    units = np.bincount(index, weights=x - null)  # [group]
    observed = abs(units.sum())
    tolerance = 1e-9 * max(1.0, float(np.abs(units).sum()))  # equal sums must count as equal
    if len(units) <= 16:
        bits = (np.arange(2 ** len(units))[:, None] >> np.arange(len(units))) & 1  # [flip, group]
        sums = np.abs(((1 - 2 * bits) * units).sum(1))
        return float((sums >= observed - tolerance).mean())
    whole = _whole_multiples(units)
    if whole is not None:
        return _flipped_sum_tail(whole)
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_flips, 4096):  # bounded memory for many groups
        signs = rng.choice((-1.0, 1.0), size=(min(4096, n_flips - start), len(units)))
        hits += int((np.abs(signs @ units) >= observed - tolerance).sum())
    return (1 + hits) / (1 + n_flips)


def _whole_multiples(
    units: np.ndarray, max_denominator: int = 64, max_total: int = 100_000
) -> np.ndarray | None:
    """``units * d`` as whole numbers (signs kept) for the smallest ``d <= max_denominator`` that makes them
    whole, to rounding; ``None`` when none does or their magnitudes sum past ``max_total``."""
    for d in range(1, max_denominator + 1):
        scaled = units * d
        whole = np.rint(scaled)
        if np.abs(scaled - whole).max() <= 1e-9 * d and np.abs(whole).sum() <= max_total:
            return whole.astype(np.int64)
    return None


def _flipped_sum_tail(whole: np.ndarray) -> float:
    """``P(|sum_i s_i |w_i|| >= |sum_i w_i|)`` over independent fair signs ``s_i``, exactly: the distribution
    of the flipped sum, built by convolving in one unit at a time (index ``k`` holds the sum ``k - total``)."""
    magnitudes = np.abs(whole)
    total = int(magnitudes.sum())
    density = np.zeros(2 * total + 1)
    density[total] = 1.0
    for a in magnitudes[magnitudes > 0]:
        density = 0.5 * (np.roll(density, int(a)) + np.roll(density, -int(a)))  # no wrap: |sum| <= total
    observed = abs(int(whole.sum()))
    sums = np.abs(np.arange(-total, total + 1))
    return float(min(1.0, density[sums >= observed].sum()))


def _weights(weights: Sequence[float] | np.ndarray, x: np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != x.shape or (w < 0).any() or not w.sum() > 0:
        raise ValueError(
            f"weights of shape {w.shape} (min {w.min() if w.size else 'none'}) for values {x.shape}; give one "
            "non-negative weight per value, not all zero"
        )
    return w


def _group_resample_means(
    x: np.ndarray, w: np.ndarray, groups: Sequence | np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """The weighted means of ``n_boot`` resamples of whole groups: ``[resample]``."""
    groups = np.asarray(groups)
    if groups.shape != x.shape:
        raise ValueError(
            f"groups has shape {groups.shape} but values {x.shape}; give one group label per value"
        )
    labels, index = np.unique(groups, return_inverse=True)
    sums = np.bincount(index, weights=w * x, minlength=len(labels))  # [group]
    counts = np.bincount(index, weights=w, minlength=len(labels))  # [group]
    draws = rng.integers(0, len(labels), size=(n_boot, len(labels)))  # [resample, group]
    with np.errstate(
        invalid="ignore"
    ):  # a resample of only zero-weight groups has no mean: NaN, not a warning
        return sums[draws].sum(axis=1) / counts[draws].sum(axis=1)


def bootstrap_interval(
    samples: Sequence[Sequence[float] | np.ndarray],
    statistic: Callable[..., float],
    n_boot: int,
    seed: int,
    level: float = 0.95,
) -> tuple[float, float, float] | None:
    """A statistic of independent samples and its percentile bootstrap interval, each sample resampled on its own
    (``scipy.stats.bootstrap``, unpaired): an AUC of positives against negatives keeps both class sizes.

    ``statistic(*samples)`` is called with one array per sample. ``None`` where a sample holds fewer than two
    values: one value says nothing about its spread.

    >>> diff = lambda a, b: float(a.mean() - b.mean())
    >>> value, low, high = bootstrap_interval([[1.0, 2.0, 3.0], [0.0, 1.0]], diff, n_boot=200, seed=0)
    >>> value, low <= value <= high
    (1.5, True)
    >>> bootstrap_interval([[1.0], [0.0, 1.0]], diff, n_boot=200, seed=0) is None
    True
    """
    from scipy.stats import bootstrap

    data = tuple(_floats(s) for s in samples)
    if n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"n_boot={n_boot}, level={level}; give n_boot >= 1 and a level between 0 and 1")
    value = float(statistic(*data))
    if min(len(x) for x in data) < 2:
        return None
    found = bootstrap(
        data,
        statistic,
        n_resamples=n_boot,
        vectorized=False,
        paired=False,
        confidence_level=level,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return value, float(found.confidence_interval.low), float(found.confidence_interval.high)
