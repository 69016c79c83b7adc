"""Sign-flip tests over groups, the interval that inverts them, and the paired twin-difference test.

Each group's summed deviation from the null is one unit; if the values are symmetric around the null, a unit is
as likely positive as negative, so the observed ``|sum of units|`` is compared with its distribution under random
sign flips of the units. That holds however the values inside a group depend on each other, and exactly for a
twin difference: with no effect of the switch word, which twin is subtracted from which is arbitrary, so the
difference's sign is a coin flip. It does *not* hold for right-or-wrong values at a chance level other than 0.5
(a Bernoulli(0.25) unit is not symmetric around 0.25: 0 of 10 right would give p = 0.002 by sign flips where
the exact binomial test gives 0.076), so :func:`sign_flip_test` refuses them.

The flips are enumerated (all ``2**groups``) up to 16 groups; beyond, the p-value is exact when every unit is a
whole multiple of ``1 / d`` for a ``d`` up to 64 (right-or-wrong values at 0.5: a convolution over whole
numbers) and otherwise estimated from seeded random flips as ``(1 + hits) / (1 + n_flips)``. The enumeration is
``scipy.stats.permutation_test``'s one-sample randomisation test (the tests check it against scipy), written
here because scipy takes 30 ms at 12 groups and half a second at 16, where this takes a tenth of a millisecond,
and has no exact answer beyond 16.

:func:`sign_flip_interval` is the set of means the test does not reject: flipping the signs of a set ``F`` of
groups reaches the observed ``|sum|`` at mean ``mu`` exactly when ``mu`` lies between the pooled means of ``F``
and of the other groups, so each flip accepts an interval and the confidence set is read off their ends. It
excludes a value exactly when the test at that value rejects, and it is infinite when the level asks for more
than the flips can give (5 groups: the smallest two-sided p-value is 2/32 > 0.05).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from interp.analysis.stats.intervals import _floats, _group_sums
from interp.analysis.stats.results import Comparison, Interval

EXACT_UP_TO = 16
"""Groups up to which every sign flip is counted (2**16 flips)."""


def sign_flip_test(
    values: Sequence[float] | np.ndarray,
    null: float,
    *,
    groups: Sequence | np.ndarray | None = None,
    n_flips: int = 20_000,
    seed: int = 0,
) -> float:
    """Two-sided p-value that the mean of ``values`` is ``null``, by flipping the signs of whole groups.

    Each group's ``sum(x - null)`` is a unit (see the module's description for when that is valid); without
    ``groups`` each value is its own group. Right-or-wrong values are accepted only against 0.5, where a schema's
    twins then count once, as one unit of two trials; at any other chance level use
    :func:`~interp.analysis.stats.binomial_test` over independent units.

    >>> sign_flip_test([1.0, 1.0, 1.0, 1.0, 1.0], 0.5)  # 2 of the 32 flips are as extreme: 1/16
    0.0625
    >>> sign_flip_test([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 0.5, groups=[0, 0, 1, 1, 2, 2])  # three units: 1/4
    0.25

    Raises:
        ValueError: ``values`` is empty or not finite, right-or-wrong values are tested against a null other
            than 0.5, ``groups`` does not give one label per value, or ``n_flips`` is below 1.
    """
    x = _checked(values, n_flips)
    if null != 0.5 and np.isin(x, (0.0, 1.0)).all() and (x != null).any():  # all at the null: p = 1
        raise ValueError(
            f"values are all 0 or 1 (right or wrong) and null={null}: flipping signs assumes each unit is "
            f"symmetric around the null, which right-or-wrong values are only at 0.5; use "
            f"binomial_test(successes, n, {null}) over independent units (one per group, such as a twin pair "
            "right in both twins), or label_permutation_test to compare two sets of them"
        )
    sums, counts = _group_sums(x - null, np.ones(len(x)), groups)
    units = sums  # [group]: each group's summed deviation from the null
    observed = abs(units.sum())
    tolerance = 1e-9 * max(1.0, float(np.abs(units).sum()))  # equal sums must count as equal
    if len(units) <= EXACT_UP_TO:
        sums = np.abs(_all_signs(len(units)) @ units)
        return float((sums >= observed - tolerance).mean())
    whole = _whole_multiples(units)
    if whole is not None:
        return _flipped_sum_tail(whole)
    hits = sum(
        int((np.abs(signs @ units) >= observed - tolerance).sum())
        for signs in _random_signs(len(units), n_flips, seed)
    )
    return (1 + hits) / (1 + n_flips)


def sign_flip_interval(
    values: Sequence[float] | np.ndarray,
    groups: Sequence | np.ndarray | None = None,
    *,
    level: float = 0.95,
    n_flips: int = 20_000,
    seed: int = 0,
) -> Interval:
    """The means :func:`sign_flip_test` does not reject at ``1 - level``: its matching interval (see the module's
    description), exact up to 16 groups and from the test's own seeded random flips beyond.

    Its coverage is exact wherever the values are symmetric around their mean (at least ``level``, up to the
    flips' discreteness); it is unbounded where no mean can be rejected.

    >>> r = sign_flip_interval([0.4, 1.3, 0.9, 2.2, 1.1, 0.6])  # 6 groups: from the least to the most
    >>> round(r.mean, 4), r.low, r.high
    (1.0833, 0.4, 2.2)
    >>> sign_flip_interval([0.4, 1.3, 0.9, 2.2, 1.1]).low  # 5 groups: no p-value reaches 0.05
    -inf

    Raises:
        ValueError: as :func:`sign_flip_test`, or ``level`` is not between 0 and 1.
    """
    x = _checked(values, n_flips)
    if not 0 < level < 1:
        raise ValueError(f"level={level}; give a confidence level between 0 and 1, such as 0.95")
    sums, counts = _group_sums(x, np.ones(len(x)), groups)  # [group] each
    mean = float(x.mean())
    n = len(sums)
    exact = n <= EXACT_UP_TO
    flips = [_all_signs(n)] if exact else list(_random_signs(n, n_flips, seed))
    low_ends, high_ends = zip(*(_accepted(signs < 0, sums, counts) for signs in flips), strict=True)
    lows, highs = np.concatenate(low_ends), np.concatenate(high_ends)
    if not exact:  # the observed arrangement counts once more, as in the estimated p-value
        lows, highs = np.append(lows, -math.inf), np.append(highs, math.inf)
    need = math.floor(round((1 - level) * len(lows), 9)) + 1  # p(mu) > 1 - level: at least this many accept
    low = float(np.partition(lows, need - 1)[need - 1])
    high = float(-np.partition(-highs, need - 1)[need - 1])
    return Interval(mean, low, high, level, "sign-flip", n)


def twin_difference_test(
    differences: Sequence[float] | np.ndarray,
    groups: Sequence | np.ndarray | None = None,
    *,
    level: float = 0.95,
    n_flips: int = 20_000,
    seed: int = 0,
) -> Comparison:
    """The paired test of a signed twin difference: is its mean 0?

    ``differences`` holds one value per twin pair, the preference for the expected answer in one twin minus the
    same preference in the other, signed so that sensitivity to the switch word is positive (for "it" after
    *tired* and after *wide*: ``(animal - street | tired) - (animal - street | wide)``). ``groups`` joins pairs
    that are not independent (several pairs of one schema); without it each pair is one unit. The p-value is
    :func:`sign_flip_test` at 0 and the interval :func:`sign_flip_interval`, so the interval excludes 0 exactly
    when ``p_value <= 1 - level``.

    >>> found = twin_difference_test([0.52, 0.31, 0.8, 0.12, 0.44, 0.27])  # 6 of 6 positive
    >>> found.p_value, found.exact, found.method
    (0.03125, True, 'sign flips over 6 twin pairs')

    Raises:
        ValueError: as :func:`sign_flip_test`.
    """
    x = _checked(differences, n_flips)
    interval = sign_flip_interval(x, groups, level=level, n_flips=n_flips, seed=seed)
    n = interval.n_groups
    exact = n <= EXACT_UP_TO
    p = sign_flip_test(x, 0.0, groups=groups, n_flips=n_flips, seed=seed)
    units = "twin pairs" if groups is None else "groups of twin pairs"
    return Comparison(interval.mean, p, n, exact, f"sign flips over {n} {units}", interval)


def _accepted(flipped: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per flip (``flipped``: ``[flip, group]``), the means it accepts: between the pooled mean of the flipped
    groups and that of the others; everything where either set is empty (no flip, or all)."""
    flipped = flipped.astype(np.float64)  # a float product: numpy multiplies booleans far more slowly
    s_flipped, n_flipped = flipped @ sums, flipped @ counts  # [flip]
    s_kept, n_kept = (1 - flipped) @ sums, (1 - flipped) @ counts
    with np.errstate(invalid="ignore", divide="ignore"):
        a, b = s_flipped / n_flipped, s_kept / n_kept  # NaN for an empty set
    everything = (n_flipped == 0) | (n_kept == 0)
    return np.where(everything, -math.inf, np.fmin(a, b)), np.where(everything, math.inf, np.fmax(a, b))


def _checked(values: Sequence[float] | np.ndarray, n_flips: int) -> np.ndarray:
    x = _floats(values)
    if not np.isfinite(x).all():
        raise ValueError(f"values hold {int((~np.isfinite(x)).sum())} NaN or infinite entries; drop them")
    if n_flips < 1:
        raise ValueError(f"n_flips={n_flips}; give at least 1")
    return x


@functools.cache
def _all_signs(n: int) -> np.ndarray:
    """Every sign pattern over ``n`` groups: ``[2**n, n]`` of +-1.0 (read-only: one array per ``n``, shared)."""
    signs = (1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)).astype(np.float64)
    signs.flags.writeable = False
    return signs


def _random_signs(n: int, n_flips: int, seed: int) -> Iterator[np.ndarray]:
    """``n_flips`` seeded random sign patterns over ``n`` groups, in chunks of bounded memory."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_flips, 4096):
        yield rng.choice((-1.0, 1.0), size=(min(4096, n_flips - start), n))


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
