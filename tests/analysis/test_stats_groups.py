"""The grouped intervals and tests against computations written here (plain loops, every flip or relabelling
enumerated) and against scipy where scipy is not what the code calls; what each returns says how it was got."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from interp.analysis.stats import (
    MIN_GROUPS,
    Interval,
    bootstrap_mean_interval,
    correct_intervals,
    correct_tests,
    group_interval,
    holm,
    label_permutation_test,
    sign_flip_interval,
    sign_flip_test,
    twin_difference_test,
)


def _twins(n_groups, seed, shift=0.0):
    rng = np.random.default_rng(seed)
    values = np.repeat(rng.normal(shift, 1.0, n_groups), 2) + rng.normal(0, 0.5, 2 * n_groups)
    return values, np.repeat(np.arange(n_groups), 2)


def test_the_t_interval_over_equal_groups_is_scipys_t_interval_of_their_means():
    for n_groups in (2, 3, 6, 12, 40):
        values, groups = _twins(n_groups, n_groups)
        found = group_interval(values, groups, level=0.9)
        expected = stats.ttest_1samp(values.reshape(n_groups, 2).mean(1), 0.0).confidence_interval(0.9)
        assert (found.low, found.high) == pytest.approx((expected.low, expected.high), rel=1e-12, abs=1e-12)
        assert (found.method, found.n_groups, found.exploratory) == ("t", n_groups, False)
        assert found.label == f"90% t-interval over {n_groups} groups"


def test_the_t_interval_over_unequal_weighted_groups_is_the_cluster_robust_one():
    rng = np.random.default_rng(1)
    parts, totals = rng.normal(1.0, 1.0, 30), rng.uniform(0.5, 3.0, 30)
    groups = rng.integers(0, 7, 30)
    found = group_interval(parts / totals, groups, weights=totals)
    ratio = parts.sum() / totals.sum()
    labels = sorted(set(groups.tolist()))
    s = [parts[groups == g].sum() for g in labels]
    c = [totals[groups == g].sum() for g in labels]
    g = len(labels)
    residual = [(si - ratio * ci) / (sum(c) / g) for si, ci in zip(s, c, strict=True)]
    se = math.sqrt(sum(r * r for r in residual) / (g * (g - 1)))
    half = stats.t.ppf(0.975, g - 1) * se
    assert found.mean == pytest.approx(ratio, rel=1e-12)
    assert (found.low, found.high) == pytest.approx((ratio - half, ratio + half), rel=1e-12)


def test_bca_is_scipys_bootstrap_of_the_group_means_and_is_exploratory_below_min_groups():
    for n_groups in (6, 12):
        values, groups = _twins(n_groups, 2)
        found = group_interval(values, groups, method="bca", n_boot=500, seed=3)
        expected = stats.bootstrap(
            (values.reshape(n_groups, 2).mean(1),), np.mean, n_resamples=500, method="BCa", rng=3
        ).confidence_interval
        assert (found.low, found.high) == pytest.approx((expected.low, expected.high), rel=1e-12)
        assert found.exploratory == (n_groups < MIN_GROUPS)
    assert group_interval(values, groups, method="bca").label == "95% BCa bootstrap over 12 groups"
    constant = group_interval([0.5] * 24, groups, method="bca")  # no spread: no NaN from scipy
    assert tuple(constant) == (0.5, 0.5, 0.5)


def test_the_percentile_bootstrap_below_min_groups_says_it_is_exploratory():
    values, groups = _twins(6, 4)
    found = group_interval(values, groups, method="percentile", n_boot=300, seed=0)
    assert found.exploratory and found.label.startswith("exploratory: 95% percentile bootstrap over 6 groups")
    assert found.to_json()["label"] == found.label and found.to_json()["exploratory"] is True


def test_bootstrap_mean_interval_is_the_t_interval_below_min_groups_and_the_percentile_one_above():
    for n_groups, method in ((6, "t"), (MIN_GROUPS - 1, "t"), (MIN_GROUPS, "percentile"), (15, "percentile")):
        values, groups = _twins(n_groups, n_groups)
        expected = group_interval(values, groups, method=method, n_boot=400, seed=5)
        assert bootstrap_mean_interval(values, 400, 5, groups=groups) == tuple(expected), n_groups
    one = group_interval([1.0, 2.0], [0, 0])
    assert math.isnan(one.low) and one.method == "none" and one.label.startswith("no interval: 1 group")
    assert all(math.isnan(v) for v in bootstrap_mean_interval([1.0, 2.0], 10, 0, groups=[0, 0])[1:])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: group_interval([1.0, 2.0], level=95), r"level=95; give a confidence level between 0 and 1"),
        (lambda: group_interval([1.0, 2.0], method="normal"), r"method='normal'; use 't', 'bca' or"),
        (lambda: group_interval([1.0, 2.0], [0]), r"groups has shape \(1,\) but values \(2,\)"),
        (lambda: group_interval([1.0, 2.0], method="bca", n_boot=0), r"n_boot=0; give at least 1"),
        (lambda: sign_flip_interval([1.0, 2.0], level=1.0), r"level=1.0; give a confidence level"),
        (lambda: label_permutation_test([1.0, 2.0], ["a"]), r"1 labels for 2 values"),
        (lambda: label_permutation_test([1.0, 2.0, 3.0], "abc"), r"labels name 3 sets"),
        (
            lambda: label_permutation_test([1.0, 2.0, 3.0, 4.0], "abab", [0, 0, 1, 1]),
            r"group 0 holds values of both labels.*twin_difference_test",
        ),
        (lambda: correct_tests(" ", [0.1]), r"family=''; say what the family is"),
        (lambda: correct_tests("heads", [0.1], alpha=5), r"alpha=5; give a family-wise error rate"),
        (lambda: correct_tests("heads", [1.2]), r"p-values must lie in \[0, 1\]"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_sign_flip_test_refuses_right_or_wrong_values_away_from_one_half():
    values = [0.0] * 10  # 0 of 10 right
    with pytest.raises(
        ValueError, match=r"all 0 or 1 \(right or wrong\) and null=0.25.*binomial_test\(successes, n, 0.25\)"
    ):
        sign_flip_test(values, 0.25)
    assert sign_flip_test([1.0, 0.0, 1.0, 1.0], 0.5) == pytest.approx(0.625)  # at 0.5 they are symmetric
    assert sign_flip_test([0.5, 0.0, 1.0, 0.25], 0.25) > 0  # graded values are the caller's to judge


def _p(x, groups, mu):
    """The sign-flip p-value at ``mu`` by enumerating every flip of the groups' summed deviations."""
    units = np.array(
        [sum(v - mu for v, g in zip(x, groups, strict=True) if g == k) for k in sorted(set(groups))]
    )
    observed = abs(units.sum())
    flips = itertools.product((1, -1), repeat=len(units))
    return np.mean([abs(np.dot(s, units)) >= observed - 1e-9 for s in flips])


@pytest.mark.parametrize("n_groups", [6, 7, 9])
def test_the_sign_flip_interval_is_where_the_test_does_not_reject(n_groups):
    rng = np.random.default_rng(n_groups)
    sizes = rng.integers(1, 4, n_groups)
    groups = np.repeat(np.arange(n_groups), sizes).tolist()
    x = rng.normal(0.3, 1.0, len(groups))
    found = sign_flip_interval(x, groups)
    assert found.method == "sign-flip" and found.n_groups == n_groups and not found.exploratory
    scale = 1e-7 * (1 + abs(found.low) + abs(found.high))
    for end, outward in ((found.low, -1), (found.high, 1)):
        assert _p(x, groups, end + outward * scale) <= 0.05 < _p(x, groups, end - outward * scale)
    # and what lies inside is accepted: a grid between the ends
    for mu in np.linspace(found.low, found.high, 9)[1:-1]:
        assert _p(x, groups, mu) > 0.05


def test_the_sign_flip_interval_is_unbounded_where_no_mean_can_be_rejected():
    found = sign_flip_interval([0.4, 1.3, 0.9, 2.2, 1.1])  # 5 groups: the smallest p-value is 2/32
    assert (found.low, found.high) == (-math.inf, math.inf)
    assert found.to_json()["ci"] == ["-inf", "inf"]
    assert math.isfinite(sign_flip_interval([0.4, 1.3, 0.9, 2.2, 1.1], level=0.9).low)  # 2/32 < 0.1


def test_beyond_sixteen_groups_the_interval_uses_the_tests_own_flips():
    x, groups = _twins(20, 7, shift=0.4)
    found = sign_flip_interval(x, groups, n_flips=4000, seed=2)
    for end, outward in ((found.low, -1), (found.high, 1)):
        outside = sign_flip_test(x, end + outward * 1e-6, groups=groups, n_flips=4000, seed=2)
        inside = sign_flip_test(x, end - outward * 1e-6, groups=groups, n_flips=4000, seed=2)
        assert outside <= 0.05 < inside


def test_the_twin_difference_test_is_the_sign_flip_test_at_zero_with_its_interval():
    rng = np.random.default_rng(3)
    agree = 0
    for trial in range(200):
        n = (6, 8, 12)[trial % 3]
        d = rng.normal(rng.choice([0.0, 0.5, 1.0]), 1.0, n)
        found = twin_difference_test(d)
        assert found.p_value == sign_flip_test(d, 0.0)
        assert found.interval.excludes(0.0) == (found.p_value <= 0.05), (trial, found)
        agree += found.interval.excludes(0.0)
    assert 20 < agree < 180  # both outcomes occur
    six = twin_difference_test([0.52, 0.31, 0.8, 0.12, 0.44, 0.27])
    assert (six.p_value, six.n_units, six.exact, six.estimate) == (2 / 64, 6, True, pytest.approx(0.41))
    # pairs of one schema join into one unit
    joined = twin_difference_test([0.5, 0.7, -0.2, 0.4], groups=[0, 0, 1, 2])
    assert joined.n_units == 3 and joined.p_value == sign_flip_test(
        [0.5, 0.7, -0.2, 0.4], 0.0, groups=[0, 0, 1, 2]
    )
    assert joined.method == "sign flips over 3 groups of twin pairs"


def _split_p(a, b):
    """Two-sided p of the difference of means, twice the smaller one-sided one, by enumerating every split of
    the units into sets of these sizes."""
    units = np.concatenate([a, b])
    observed = a.mean() - b.mean()
    above = below = total = 0
    for chosen in itertools.combinations(range(len(units)), len(a)):
        mask = np.zeros(len(units), dtype=bool)
        mask[list(chosen)] = True
        difference = units[mask].mean() - units[~mask].mean()
        above += difference >= observed - 1e-12
        below += difference <= observed + 1e-12
        total += 1
    return min(1.0, 2 * min(above, below) / total)


def test_label_permutation_counts_each_group_once_and_enumerates_every_split():
    rng = np.random.default_rng(4)
    means = np.concatenate([rng.normal(1.0, 1, 5), rng.normal(0.0, 1, 6)])  # 5 schemas against 6
    values = np.repeat(means, 2) + np.tile([0.3, -0.3], 11)  # twins: each schema's mean is its unit
    labels = ["named"] * 10 + ["random"] * 12
    found = label_permutation_test(values, labels, np.repeat(np.arange(11), 2))
    assert found.p_value == pytest.approx(_split_p(means[:5], means[5:]), rel=1e-12)
    assert found.estimate == pytest.approx(means[:5].mean() - means[5:].mean())
    assert (found.n_units, found.exact) == (11, True)
    assert found.method == "label permutations over 5 against 6 groups"
    alone = label_permutation_test(values, labels)  # twins counted twice: more units, a smaller p-value
    assert alone.n_units == 22 and alone.p_value < found.p_value
    greater = label_permutation_test(values, labels, np.repeat(np.arange(11), 2), alternative="greater")
    assert greater.p_value == pytest.approx(found.p_value / 2, rel=1e-12)  # the first set is the larger


def test_label_permutation_beyond_n_resamples_is_estimated_near_the_exact_value():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.6, 1, 8), rng.normal(0, 1, 8)  # 12,870 splits
    exact = _split_p(a, b)
    found = label_permutation_test(np.concatenate([a, b]), [0] * 8 + [1] * 8, n_resamples=4000, seed=1)
    assert not found.exact
    assert found.p_value == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 4000) + 1 / 4000)


def test_a_family_of_tests_is_holm_corrected_and_says_so():
    p = [0.001, 0.03, 0.4, 0.011]
    found = correct_tests("every head tested", p)
    assert found.adjusted == tuple(holm(p)) and found.p_values == tuple(p)
    assert found.rejected == (True, False, False, True)  # 4 x 0.001 and 3 x 0.011 hold; 2 x 0.03 does not
    assert found.label == "Holm over 4 tests (every head tested), family-wise error 0.05: 2 of 4 rejected"
    assert found.to_json()["rejected"] == [True, False, False, True]


def test_a_family_of_intervals_is_computed_at_the_bonferroni_level():
    from functools import partial

    members = [partial(group_interval, *_twins(8, seed)) for seed in range(5)]
    found = correct_intervals("the five words' shares", members, alpha=0.05)
    assert found.each_level == pytest.approx(0.99) and found.size == 5
    for member, interval in zip(members, found.intervals, strict=True):
        assert interval == member(level=0.99)
        assert interval.high - interval.low > member().high - member().low  # wider than each alone
    assert found.label == (
        "Bonferroni over 5 intervals (the five words' shares): each at 99%, so that all hold together with "
        "probability 95%"
    )


def test_an_interval_unpacks_like_the_tuples_before_it():
    found = Interval(0.6, 0.5, 0.7, 0.95, "t", 12)
    mean, low, high = found
    assert (mean, low, high) == (0.6, 0.5, 0.7) and found.excludes(0.45) and not found.excludes(0.5)
    assert found.to_json() == {
        "mean": 0.6, "ci": [0.5, 0.7], "level": 0.95, "method": "t", "n_groups": 12, "exploratory": False,
        "label": "95% t-interval over 12 groups",
    }  # fmt: skip


def test_the_t_interval_of_right_or_wrong_values_stays_in_the_unit_interval():
    pairs = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]  # 5 of 6 twin pairs right in both twins
    found = group_interval(np.repeat(pairs, 2), np.repeat(np.arange(6), 2))
    sd = math.sqrt(sum((v - 5 / 6) ** 2 for v in pairs) / 5)
    assert (found.low, found.high) == pytest.approx((5 / 6 - stats.t.ppf(0.975, 5) * sd / math.sqrt(6), 1.0))
    graded = group_interval([0.9, 1.0, 0.95, 1.0, 0.5, 1.0], np.arange(6))  # not right-or-wrong: not cut
    assert graded.high > 1.0
