"""Each helper's size (how often it rejects a true null, against its level 0.05) and coverage (how often its
interval holds a known mean, against 95%), on seeded simulations at 6 and 12 groups: twin pairs whose values
share a group effect, so that counting values instead of groups would show.

Each rate is a proportion over a few hundred to a few thousand simulated data sets; the bounds allow three
standard errors of it around the exact value where there is one.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
from scipy import stats

from interp.analysis.stats import (
    binomial_test,
    correct_intervals,
    correct_tests,
    group_interval,
    label_permutation_test,
    sign_flip_test,
    twin_difference_test,
)

ALPHA = 0.05


def _se(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-4) / n)


def _twins(rng, n_groups: int, mean: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Two values per group: a normal group effect around ``mean`` plus a smaller noise of each twin."""
    values = np.repeat(rng.normal(mean, 1.0, n_groups), 2) + rng.normal(0.0, 0.5, 2 * n_groups)
    return values, np.repeat(np.arange(n_groups), 2)


def _flip_size(n_groups: int) -> float:
    """The exact size of the two-sided sign-flip test at ALPHA for continuous symmetric units: p-values are
    multiples of 2 / 2**n, rejected up to ALPHA."""
    return 2 * math.floor(ALPHA * 2**n_groups / 2) / 2**n_groups


@pytest.mark.parametrize("n_groups", [6, 12])
def test_the_t_interval_covers_at_few_groups_where_a_bootstrap_does_not(n_groups):
    rng = np.random.default_rng(n_groups)
    n, n_boot = 1500, 500
    t_hits = boot_hits = 0
    for i in range(n):
        values, groups = _twins(rng, n_groups, mean=1.0)
        t_hits += not group_interval(values, groups).excludes(1.0)
        if i < n_boot:
            found = group_interval(values, groups, method="percentile", n_boot=1000, seed=i)
            boot_hits += not found.excludes(1.0)
            assert found.exploratory == (n_groups < 10)
    t_rate, boot_rate = t_hits / n, boot_hits / n_boot
    assert abs(t_rate - 0.95) < 3 * _se(0.95, n), t_rate
    # the percentile bootstrap over the same groups: about 86% at 6 groups, 92% at 12 (MIN_GROUPS says so)
    assert boot_rate < (0.90 if n_groups == 6 else 0.945), boot_rate
    assert boot_rate < t_rate - 0.01


@pytest.mark.parametrize("n_groups", [6, 12])
def test_the_sign_flip_test_holds_its_size_over_twins(n_groups):
    rng = np.random.default_rng(100 + n_groups)
    n = 2000
    rejected = 0
    for _ in range(n):
        values, groups = _twins(rng, n_groups)
        rejected += sign_flip_test(values, 0.0, groups=groups) <= ALPHA
    rate = rejected / n
    exact = _flip_size(n_groups)  # 2/64 at 6 groups, 204/4096 at 12
    assert abs(rate - exact) < 3 * _se(exact, n), (rate, exact)
    assert exact <= ALPHA


def _size(decide, n_units: int, chance: float) -> float:
    """The exact rejection rate of a test whose decision depends only on how many of ``n_units`` independent
    units are right: the chance of each count times whether ``decide(count)`` rejects."""
    return float(sum(stats.binom.pmf(k, n_units, chance) for k in range(n_units + 1) if decide(k)))


@pytest.mark.parametrize("n_groups", [6, 12])
def test_right_or_wrong_twins_at_one_half_count_once(n_groups):
    """Twins that agree (each schema right in both or in neither, at chance): sign flips over schemas keep the
    size, to the exact rejection rate; a binomial test over the twins as if independent rejects more often."""
    groups = np.repeat(np.arange(n_groups), 2)

    def flips(k):  # k schemas right in both twins, the others in neither
        right = np.repeat((np.arange(n_groups) < k).astype(float), 2)
        return sign_flip_test(right, 0.5, groups=groups) <= ALPHA

    size = _size(flips, n_groups, 0.5)
    assert size == pytest.approx(_size(lambda k: binomial_test(k, n_groups) <= ALPHA, n_groups, 0.5))
    assert size <= ALPHA
    as_trials = _size(lambda k: binomial_test(2 * k, 2 * n_groups) <= ALPHA, n_groups, 0.5)
    assert as_trials > 2 * ALPHA, as_trials


@pytest.mark.parametrize("n_units", [6, 12])
def test_the_binomial_test_holds_its_size_at_a_quarter(n_units):
    rng = np.random.default_rng(200 + n_units)
    n = 20000
    rejects = {k: binomial_test(k, n_units, 0.25) <= ALPHA for k in range(n_units + 1)}
    rate = np.mean([rejects[int(k)] for k in (rng.random((n, n_units)) < 0.25).sum(1)])
    exact = _size(rejects.__getitem__, n_units, 0.25)
    assert abs(rate - exact) < 3 * _se(exact, n) and exact <= ALPHA


def test_sign_flips_at_a_quarter_are_refused_because_they_do_not_keep_their_size():
    """What sign_flip_test would do with right-or-wrong values at 0.25, every flip of (x - 0.25) counted here:
    0 of 6 right, which chance gives 18% of the time, reads as p = 2/64."""

    def naive(k, n):
        units = np.where(np.arange(n) < k, 0.75, -0.25)
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)  # [flip, unit]
        return float((np.abs(signs @ units) >= abs(units.sum()) - 1e-9).mean())

    assert naive(0, 6) == 2 / 64 and binomial_test(0, 6, 0.25) > 0.3
    assert _size(lambda k: naive(k, 6) <= ALPHA, 6, 0.25) > 3 * ALPHA
    assert naive(0, 10) == pytest.approx(0.002, abs=1e-4)  # the example; the exact test: 0.076
    assert binomial_test(0, 10, 0.25) == pytest.approx(0.076, abs=1e-3)
    with pytest.raises(ValueError, match="right or wrong"):
        sign_flip_test([0.0] * 6, 0.25)


@pytest.mark.parametrize("n_groups", [6, 12])
def test_the_label_permutation_test_holds_its_size_over_groups_of_twins(n_groups):
    rng = np.random.default_rng(300 + n_groups)
    n = 600
    labels = ["a"] * n_groups + ["b"] * n_groups  # half the groups (both twins) in each set
    rejected = 0
    for i in range(n):
        values, groups = _twins(rng, n_groups)
        # 3 against 3 is enumerated (20 splits); 6 against 6 from 500 random relabellings of its 924, the faster
        # path (enumerating them takes ten times as long)
        found = label_permutation_test(values, labels, groups, n_resamples=500, seed=i)
        assert found.exact == (n_groups == 6)
        rejected += found.p_value <= ALPHA
    rate = rejected / n
    if n_groups == 6:
        assert rate == 0.0  # 3 groups against 3: the smallest two-sided p-value is 2/20, so it never rejects
    else:
        assert abs(rate - ALPHA) < 3 * _se(ALPHA, n), rate


@pytest.mark.parametrize("n_pairs", [6, 12])
def test_the_twin_difference_test_holds_its_size_and_its_interval_covers(n_pairs):
    rng = np.random.default_rng(400 + n_pairs)
    n = 1000
    rejected = covered = 0
    for _ in range(n):
        rejected += twin_difference_test(rng.normal(0.0, 1.0, n_pairs)).p_value <= ALPHA
        covered += not twin_difference_test(rng.normal(0.7, 1.0, n_pairs)).interval.excludes(0.7)
    exact = _flip_size(n_pairs)
    assert abs(rejected / n - exact) < 3 * _se(exact, n)
    # the interval is the inverted test: it misses the true mean exactly when the test at it rejects
    assert abs(covered / n - (1 - exact)) < 3 * _se(exact, n) and 1 - exact >= 0.95


def test_a_corrected_family_holds_its_family_wise_error():
    rng = np.random.default_rng(8)
    n, m = 2000, 10
    p = rng.random((n, m))  # ten true nulls per family
    corrected = np.mean([any(correct_tests("ten nulls", row).rejected) for row in p])
    uncorrected = np.mean((p <= ALPHA).any(1))
    assert corrected <= ALPHA + 3 * _se(ALPHA, n) and uncorrected > 0.3  # 1 - 0.95**10 = 0.40
    hits = 0
    for _ in range(600):
        members = [partial(group_interval, *_twins(rng, 6, mean=1.0)) for _ in range(5)]
        hits += all(not i.excludes(1.0) for i in correct_intervals("five means", members).intervals)
    assert hits / 600 > 0.95 - 3 * _se(0.95, 600)
