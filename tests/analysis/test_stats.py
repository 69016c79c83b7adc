"""Wilson intervals, the exact binomial test, Holm's correction, the grouped sign-flip test and the bootstrap,
against direct computations written here and, where scipy is not what the code calls, against scipy."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from interp.analysis import binomial_test, holm, wilson_interval
from interp.analysis.stats import bootstrap_mean_interval, mean_interval, sign_flip_test


def _wilson(k, n, z):
    """The score interval by its formula (Wilson 1927)."""
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return centre - half, centre + half


def _binomial_exact(k, n, p, alternative):
    """The exact binomial p-value in integer arithmetic: P(X = i) = C(n, i) a^i b^(n - i) / d^n for p = a / d
    (a float is a binary fraction), so outcomes compare and sum without rounding."""
    ratio = Fraction(p)
    a, d = ratio.numerator, ratio.denominator
    weights = [math.comb(n, i) * a**i * (d - a) ** (n - i) for i in range(n + 1)]
    if alternative == "greater":
        tail = sum(weights[k:])
    elif alternative == "less":
        tail = sum(weights[: k + 1])
    else:
        tail = sum(w for w in weights if w <= weights[k])
    return float(min(Fraction(1), Fraction(tail, d**n)))


def test_wilson_interval_is_the_score_formula_and_stays_in_the_unit_interval():
    for z in (1.96, float(stats.norm.ppf(0.995))):
        for n in (1, 2, 5, 10, 37, 100, 512):
            for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
                low, high = wilson_interval(k, n, z=z)
                assert (low, high) == pytest.approx(_wilson(k, n, z), abs=1e-12), (k, n, z)
                assert 0.0 <= low <= k / n <= high <= 1.0
    assert wilson_interval(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    low, high = wilson_interval(50, 100)
    assert high - low == pytest.approx(0.19, abs=0.01)
    assert wilson_interval(0, 10)[0] == 0 and wilson_interval(10, 10)[1] == 1


def test_binomial_test_is_the_exact_sum():
    for n in range(0, 41):
        for k in range(n + 1):
            for alternative in ("two-sided", "greater", "less"):
                expected = _binomial_exact(k, n, 0.5, alternative) if n else 1.0
                assert binomial_test(k, n, alternative=alternative) == pytest.approx(expected, rel=1e-12)
    for k, n, p in (
        (3, 20, 0.3),
        (12, 20, 0.3),
        (0, 7, 0.1),
        (250, 300, 0.8),
        (1, 1000, 0.001),
        (0, 10, 0.25),
    ):
        for alternative in ("two-sided", "greater", "less"):
            expected = _binomial_exact(k, n, p, alternative)
            assert binomial_test(k, n, p, alternative=alternative) == pytest.approx(expected, rel=1e-9)
    # the example: 0 of 10 right where chance is a quarter is no evidence at 0.05
    assert binomial_test(0, 10, 0.25) == pytest.approx(0.0760, abs=5e-5)


def test_binomial_test_at_one_half_is_twice_the_exact_tail():
    """The hand-written test the coreference study used before: 2 P(X >= max(k, n - k)), capped at 1."""
    for n in (1, 9, 10, 101, 400):
        for k in sorted({0, 1, n // 2, (n + 1) // 2, n - 1, n}):
            tail = max(k, n - k)
            expected = min(1.0, 2 * (sum(math.comb(n, i) for i in range(tail, n + 1)) / 2**n))
            assert binomial_test(k, n) == pytest.approx(expected, rel=1e-12), (k, n)
    assert round(binomial_test(9, 10), 4) == 0.0215


def _holm_by_definition(p_values):
    """Adjusted p of the i-th smallest: the largest of min(1, (m - j + 1) p_(j)) over j <= i."""
    m = len(p_values)
    ranked = sorted(p_values)
    out = []
    for p in p_values:
        i = ranked.index(p)
        out.append(max(min(1.0, (m - j) * ranked[j]) for j in range(i + 1)))
    return out


def test_holm_matches_its_definition_and_the_step_down_decisions():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([]) == []
    for p_values in ([0.2], [0.001, 0.5, 0.02, 0.049, 0.9], [0.3, 0.3, 0.01], [1.0, 0.0]):
        assert holm(p_values) == pytest.approx(_holm_by_definition(p_values))
    p_values = [0.001, 0.012, 0.013, 0.04, 0.5]
    alpha, m = 0.05, len(p_values)
    rejected = set()
    for j, (i, p) in enumerate(sorted(enumerate(p_values), key=lambda e: e[1])):
        if p > alpha / (m - j):
            break
        rejected.add(i)
    assert {i for i, q in enumerate(holm(p_values)) if q <= alpha} == rejected == {0, 1, 2}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wilson_interval(1, 0), r"n=0; a confidence interval or test needs at least one trial"),
        (lambda: wilson_interval(11, 10), r"successes=11 is not between 0 and n=10"),
        (lambda: binomial_test(3, 5, p=1.0), r"p=1.0; the success probability must be strictly between"),
        (lambda: binomial_test(3, 5, alternative="both"), r"alternative='both'; use 'two-sided'"),
        (lambda: holm([0.5, 1.5]), r"p-values must lie in \[0, 1\], got \[1.5\]"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_binomial_test_is_exact_where_floats_would_round():
    # P(X <= 0) for n = 2000 at p = 0.5 is 2^-2000, far below the smallest float: the exact sum says 0.0
    # one-sided and the two-sided value doubles it, both without an underflow warning or a negative.
    assert binomial_test(0, 2000, alternative="less") == 0.0
    assert binomial_test(1000, 2000) == 1.0
    assert all(0 <= binomial_test(k, 30, 0.3) <= 1 for k in range(31))
    below = [binomial_test(k, 30, 0.3, alternative="less") for k in range(31)]
    above = [binomial_test(k, 30, 0.3, alternative="greater") for k in range(31)]
    assert below == sorted(below) and below[-1] == 1.0 and above[0] == 1.0
    for k in range(30):
        assert below[k] + above[k + 1] == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("name", ["results", "counts", "intervals", "sign_flip", "permutation", "family"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"interp.analysis.stats.{name}"))
    assert result.attempted >= 1 and result.failed == 0


def test_mean_intervals():
    x = np.array([0.5, 1.5, 2.0, 4.0])
    mean, low, high = mean_interval(x)
    sd = math.sqrt(sum((v - 2.0) ** 2 for v in x) / 3)  # with n - 1
    half = (
        3.182446305284263 * sd / 2
    )  # the t distribution's 97.5% point at 3 degrees of freedom, over sqrt(n)
    assert (mean, low, high) == pytest.approx((2.0, 2.0 - half, 2.0 + half), rel=1e-12)
    assert mean_interval(x, z=1.96) == pytest.approx(
        (2.0, 2.0 - 1.96 * sd / 2, 2.0 + 1.96 * sd / 2), rel=1e-12
    )
    assert all(math.isnan(v) for v in mean_interval([3.0])[1:])
    rng = np.random.default_rng(0)
    values = rng.normal(1.0, 1.0, size=400)
    mean, low, high = bootstrap_mean_interval(values, n_boot=2000, seed=1)
    _, normal_low, normal_high = mean_interval(values, z=1.96)
    assert mean == pytest.approx(values.mean())
    assert (low, high) == pytest.approx((normal_low, normal_high), abs=0.02)  # both about the same at n=400
    assert bootstrap_mean_interval(values, 2000, 1) == (mean, low, high)  # seeded
    float32 = values.astype(np.float32)
    assert bootstrap_mean_interval(float32, 10, 0)[0] == float(float32.mean())
    with pytest.raises(ValueError, match=r"non-empty 1-d sequence, got shape \(0,\)"):
        mean_interval([])


def test_bootstrap_over_groups_resamples_whole_groups():
    rng = np.random.default_rng(0)
    values, groups = rng.normal(size=40), rng.integers(0, 12, size=40).astype(str)
    assert len(set(groups)) == 11  # at least MIN_GROUPS: the percentile bootstrap
    mean, low, high = bootstrap_mean_interval(values, 300, 4, groups=groups)
    labels = sorted(set(groups))
    draws = np.random.default_rng(4).integers(0, len(labels), size=(300, len(labels)))  # the same draws
    naive = []
    for row in draws:  # the values of the drawn groups, concatenated, and their plain mean
        chosen = [v for g in row for v, label in zip(values, groups, strict=True) if label == labels[g]]
        naive.append(sum(chosen) / len(chosen))
    assert mean == pytest.approx(values.mean())
    assert (low, high) == pytest.approx(tuple(np.percentile(naive, [2.5, 97.5])), rel=1e-12)
    # each value its own group: the same interval as resampling values, up to the order of the sums
    alone = bootstrap_mean_interval(values, 300, 4, groups=np.arange(40))
    assert alone == pytest.approx(bootstrap_mean_interval(values, 300, 4), rel=1e-12)
    with pytest.raises(ValueError, match=r"groups has shape \(2,\) but values \(40,\); give one group label"):
        bootstrap_mean_interval(values, 10, 0, groups=[0, 1])


def test_weighted_bootstrap_is_the_pooled_ratio_of_the_drawn_groups():
    rng = np.random.default_rng(1)
    parts, totals = rng.normal(1.0, 1.0, size=20), rng.uniform(0.5, 3.0, size=20)
    groups = np.repeat(np.arange(10), 2)  # twins
    mean, low, high = bootstrap_mean_interval(parts / totals, 300, 2, groups=groups, weights=totals)
    assert mean == pytest.approx(parts.sum() / totals.sum(), rel=1e-12)
    draws = np.random.default_rng(2).integers(0, 10, size=(300, 10))  # the same draws
    naive = [sum(parts[groups == g].sum() for g in row) / sum(totals[groups == g].sum() for g in row)
             for row in draws]  # fmt: skip
    assert (low, high) == pytest.approx(tuple(np.percentile(naive, [2.5, 97.5])), rel=1e-12)
    unweighted = bootstrap_mean_interval(parts, 300, 2, groups=groups)
    assert bootstrap_mean_interval(parts, 300, 2, groups=groups, weights=np.ones(20)) == pytest.approx(
        unweighted
    )
    with pytest.raises(ValueError, match=r"give one non-negative weight per value"):
        bootstrap_mean_interval(parts, 10, 0, weights=-totals)


def _units(values, groups, null):
    """Each group's summed deviation from ``null``, by a plain loop."""
    sums: dict = {}
    for value, group in zip(values, groups, strict=True):
        sums[group] = sums.get(group, 0.0) + value - null
    return np.array(list(sums.values()))


def test_sign_flip_test_is_scipys_exact_randomisation_test_on_the_groups_sums():
    rng = np.random.default_rng(3)
    for n_groups in (2, 3, 7, 12, 16):
        groups = np.repeat(np.arange(n_groups), rng.integers(1, 4, size=n_groups))
        values = (rng.random(len(groups)) < 0.7).astype(float)  # right or wrong, chance 0.5
        units = _units(values, groups.tolist(), 0.5)
        expected = stats.permutation_test(
            (units,), np.sum, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
        ).pvalue
        assert sign_flip_test(values, 0.5, groups=groups) == pytest.approx(expected, rel=1e-12), n_groups


def test_sign_flip_test_estimates_the_exact_value_beyond_sixteen_groups():
    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(18), 2)  # 18 twin pairs
    values = rng.normal(0.3, 1.0, size=36)
    units = _units(values, groups.tolist(), 0.0)
    signs = 1 - 2 * ((np.arange(2**18)[:, None] >> np.arange(18)) & 1)  # every flip, counted here
    exact = float((np.abs(signs @ units) >= abs(units.sum()) - 1e-9).mean())
    estimate = sign_flip_test(values, 0.0, groups=groups, n_flips=20_000, seed=1)
    assert 0.01 < exact < 0.5  # a p-value where an estimate can miss in either direction
    assert estimate == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 20_000) + 1 / 20_001)
    assert sign_flip_test(values, 0.0, groups=groups, n_flips=20_000, seed=1) == estimate  # seeded


def test_sign_flip_test_is_exact_for_values_on_a_lattice_beyond_sixteen_groups():
    rng = np.random.default_rng(6)
    groups = np.repeat(np.arange(18), 2)  # 18 twin pairs
    signs = 1 - 2 * ((np.arange(2**18)[:, None] >> np.arange(18)) & 1)  # every flip, counted here
    for null in (0.5, 0.25):
        for rate in (0.5, 0.7, 0.9):
            values = (rng.random(36) < rate).astype(float)  # right or wrong at 0.5; graded 0, 0.5, 1 at 0.25
            if null == 0.25:
                values *= rng.choice([0.5, 1.0], size=36)
            units = _units(values, groups.tolist(), null)
            exact = float((np.abs(signs @ units) >= abs(units.sum()) - 1e-9).mean())
            assert sign_flip_test(values, null, groups=groups) == pytest.approx(exact, rel=1e-12), (
                null,
                rate,
            )


def test_twins_that_agree_count_once_in_the_sign_flip_test_but_twice_in_the_binomial_test():
    values = [1.0] * 9 + [0.0] * 3  # 9 of 12 schemas right
    twins = np.repeat(values, 2)  # each schema's two twins give the same answer
    groups = np.repeat(np.arange(12), 2)
    assert sign_flip_test(twins, 0.5, groups=groups) == pytest.approx(sign_flip_test(values, 0.5))
    assert sign_flip_test(values, 0.5) == pytest.approx(
        binomial_test(9, 12)
    )  # one trial per group: exact binomial
    assert binomial_test(18, 24) < 0.5 * binomial_test(
        9, 12
    )  # counting twins as trials overstates the evidence


def test_sign_flip_test_refuses_bad_input():
    with pytest.raises(ValueError, match="one group label per value"):
        sign_flip_test([1.0, 0.0], 0.5, groups=[0])
    with pytest.raises(ValueError, match="NaN"):
        sign_flip_test([1.0, float("nan")], 0.5)
    with pytest.raises(ValueError, match="n_flips"):
        sign_flip_test([1.0, 0.0], 0.5, n_flips=0)
