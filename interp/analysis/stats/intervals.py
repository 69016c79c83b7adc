"""Intervals of a mean over independent groups.

Values that are not independent (the twins of one schema, the rows of one prompt) are summed per group, and
every interval here counts groups, not values. :func:`group_interval` is the one to use for a mean: by default
the t-interval over groups, which keeps its coverage at few groups where a bootstrap does not (see
:data:`~interp.analysis.stats.results.MIN_GROUPS`); ``method="bca"`` gives ``scipy.stats.bootstrap``'s BCa
interval over whole groups and ``"percentile"`` the percentile bootstrap, both marked exploratory below
``MIN_GROUPS`` groups. :func:`bootstrap_mean_interval` and :func:`mean_interval` keep their older tuple form for
their callers.

The t-interval over groups is the cluster-robust one: with group sums ``S_g`` and sizes (or summed weights)
``C_g``, the estimate is ``R = sum S / sum C`` and its standard error
``sqrt(sum_g (S_g - R C_g)**2 / (mean(C)**2 G (G - 1)))``, read against the t distribution with ``G - 1``
degrees of freedom. With groups of one size it is exactly the t-interval over the group means.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from interp.analysis.stats.results import MIN_GROUPS, Interval, Method


def group_interval(
    values: Sequence[float] | np.ndarray,
    groups: Sequence | np.ndarray | None = None,
    *,
    weights: Sequence[float] | np.ndarray | None = None,
    level: float = 0.95,
    method: Method = "t",
    n_boot: int = 2000,
    seed: int = 0,
) -> Interval:
    """The mean of ``values`` and its interval over independent ``groups`` (each value its own without them).

    With ``weights`` the mean is ``sum(w * x) / sum(w)`` (a pooled ratio such as a share of summed totals:
    ``x = part / total``, ``w = total``). ``method``: ``"t"`` (the default: the t-interval over groups, see the
    module's description), ``"bca"`` (``scipy.stats.bootstrap``'s BCa over whole groups, ``n_boot`` resamples,
    ``seed``) or ``"percentile"``; a bootstrap over fewer than ``MIN_GROUPS`` groups comes back marked
    ``exploratory``. Fewer than two groups give no interval (NaN ends, method ``"none"``). The t-interval of
    right-or-wrong values (all 0 or 1) is cut to [0, 1], where their mean lies.

    >>> r = group_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], groups=[0, 0, 1, 1, 2, 2])
    >>> r.mean, round(r.low, 3), round(r.high, 3), r.label
    (3.5, -1.468, 8.468, '95% t-interval over 3 groups')

    Raises:
        ValueError: ``values`` is empty or not 1-d, ``groups`` or ``weights`` do not give one entry per value,
            a weight is negative, ``level`` is not between 0 and 1, ``method`` is unknown or ``n_boot < 1``.
    """
    x = _floats(values)
    if not 0 < level < 1:
        raise ValueError(f"level={level}; give a confidence level between 0 and 1, such as 0.95")
    if method not in ("t", "bca", "percentile"):
        raise ValueError(f"method={method!r}; use 't', 'bca' or 'percentile'")
    if method != "t" and n_boot < 1:
        raise ValueError(f"n_boot={n_boot}; give at least 1 resample")
    w = np.ones(len(x)) if weights is None else _weights(weights, x)
    sums, counts = _group_sums(x, w, groups)  # [group] each
    mean = float(x.mean()) if weights is None else float((w * x).sum() / w.sum())
    n_groups = len(sums)
    if n_groups < 2:
        return Interval(mean, math.nan, math.nan, level, "none", n_groups, exploratory=True)
    if method == "t":
        low, high = _t_interval(sums, counts, level)
        if np.isin(x, (0.0, 1.0)).all():  # right-or-wrong values: a proportion, never outside [0, 1]
            low, high = max(low, 0.0), min(high, 1.0)
    elif method == "percentile":
        low, high = _percentile(_resample_means(sums, counts, n_boot, np.random.default_rng(seed)), level)
    else:
        low, high = _bca(sums, counts, level, n_boot, seed)
    return Interval(
        mean, low, high, level, method, n_groups, exploratory=method != "t" and n_groups < MIN_GROUPS
    )


def bootstrap_mean_interval(
    values: Sequence[float] | np.ndarray,
    n_boot: int,
    seed: int,
    level: float = 0.95,
    *,
    groups: Sequence | np.ndarray | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
) -> tuple[float, float, float]:
    """The mean and its percentile bootstrap interval over whole groups, ``(mean, low, high)``; below
    ``MIN_GROUPS`` groups, where that bootstrap covers clearly less than ``level``, the t-interval over groups.

    Kept in this form for its callers; :func:`group_interval` returns the same numbers with the method that
    gave them (``method="percentile"`` at ``MIN_GROUPS`` groups or more, ``"t"`` below). A resample draws whole
    groups (``n_boot`` of them, seeded), so values that are not independent stay together; with ``weights`` the
    mean, and each resample's, is ``sum(w * x) / sum(w)``. Without ``groups`` each value is its own group.

    >>> mean, low, high = bootstrap_mean_interval([0.0, 1.0] * 20, n_boot=200, seed=0)
    >>> mean, low < 0.5 < high
    (0.5, True)
    >>> bootstrap_mean_interval([1.0, 0.0], n_boot=10, seed=0, weights=[3.0, 1.0])[0]
    0.75
    """
    n_groups = len(np.unique(np.asarray(groups))) if groups is not None else len(np.asarray(values))
    method: Method = "percentile" if n_groups >= MIN_GROUPS else "t"
    found = group_interval(
        values, groups, weights=weights, level=level, method=method, n_boot=n_boot, seed=seed
    )
    return found.mean, found.low, found.high


def mean_interval(values: Sequence[float] | np.ndarray, z: float | None = None) -> tuple[float, float, float]:
    """The mean and its 95% t-interval, ``mean -+ t * sd / sqrt(n)`` with ``t`` the t distribution's 97.5%
    point at ``n - 1`` degrees of freedom; with ``z`` the normal interval ``mean -+ z * sd / sqrt(n)`` instead.

    With fewer than two values the interval is ``(nan, nan)``: one value says nothing about its spread.

    >>> [round(v, 4) for v in mean_interval([1.0, 2.0, 3.0, 4.0])]
    [2.5, 0.4457, 4.5543]
    """
    x = _floats(values)
    mean = float(np.mean(x))
    if len(x) < 2:
        return mean, math.nan, math.nan
    scale = _t_quantile(0.95, len(x) - 1) if z is None else z
    half = scale * float(np.std(x, ddof=1)) / math.sqrt(len(x))
    return mean, mean - half, mean + half


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


@functools.cache
def _t_quantile(level: float, df: int) -> float:
    """The t distribution's two-sided ``level`` point at ``df`` degrees of freedom (cached: scipy's takes a
    tenth of a millisecond, more than the rest of an interval)."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, df))


def _t_interval(sums: np.ndarray, counts: np.ndarray, level: float) -> tuple[float, float]:
    n = len(sums)
    ratio = sums.sum() / counts.sum()
    residual = (sums - ratio * counts) / counts.mean()  # [group]: each group's deviation, in mean units
    se = math.sqrt(float((residual**2).sum()) / (n * (n - 1)))
    half = _t_quantile(level, n - 1) * se
    return float(ratio - half), float(ratio + half)


def _bca(sums: np.ndarray, counts: np.ndarray, level: float, n_boot: int, seed: int) -> tuple[float, float]:
    from scipy import stats

    means = sums / counts
    if np.ptp(means) == 0:  # every group the same: no spread to resample (scipy would answer NaN)
        return float(means[0]), float(means[0])
    found = stats.bootstrap(
        (sums, counts),
        lambda s, c, axis=-1: s.sum(axis) / c.sum(axis),
        paired=True,  # a resample draws whole groups: their sums and sizes together
        vectorized=True,
        n_resamples=n_boot,
        confidence_level=level,
        method="BCa",
        rng=seed,
        batch=1000,  # bounds memory for many groups (the jackknife is groups x groups)
    ).confidence_interval
    return float(found.low), float(found.high)


def _percentile(means: np.ndarray, level: float) -> tuple[float, float]:
    tail = round(50 * (1 - level), 10)  # percent in each tail: 2.5 exactly for a 95% interval
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def _resample_means(
    sums: np.ndarray, counts: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """The pooled means of ``n_boot`` resamples of whole groups: ``[resample]``."""
    draws = rng.integers(0, len(sums), size=(n_boot, len(sums)))  # [resample, group]
    with np.errstate(
        invalid="ignore"
    ):  # a resample of only zero-weight groups has no mean: NaN, not a warning
        return sums[draws].sum(axis=1) / counts[draws].sum(axis=1)


def _group_sums(
    x: np.ndarray, w: np.ndarray, groups: Sequence | np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per group (in sorted label order): the weighted sum of its values and its summed weight."""
    if groups is None:
        return w * x, w
    labels = np.asarray(groups)
    if labels.shape != x.shape:
        raise ValueError(
            f"groups has shape {labels.shape} but values {x.shape}; give one group label per value"
        )
    index = np.unique(labels, return_inverse=True)[1].reshape(-1)
    return np.bincount(index, weights=w * x), np.bincount(index, weights=w)


def _floats(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A 1-d float array; float32 input stays float32, so its means are the ones float32 arithmetic gives."""
    x = np.asarray(values)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"values must be a non-empty 1-d sequence, got shape {x.shape}")
    return x


def _weights(weights: Sequence[float] | np.ndarray, x: np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != x.shape or (w < 0).any() or not w.sum() > 0:
        raise ValueError(
            f"weights of shape {w.shape} (min {w.min() if w.size else 'none'}) for values {x.shape}; give one "
            "non-negative weight per value, not all zero"
        )
    return w
