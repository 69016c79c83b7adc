"""The effect a test could detect: at that effect, simulated data sets are rejected 80% of the time, by the
t-test the formula describes and by the sign-flip test the studies use; no effect where no p-value is small
enough."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from interp.analysis.stats import detectable_effect, sign_flip_test


@pytest.mark.parametrize(("n", "alpha"), [(12, 0.05), (20, 0.01)])
def test_the_detectable_effect_is_found_80_percent_of_the_time(n, alpha):
    d = detectable_effect(n, alpha, 0.8)
    rng = np.random.default_rng(n)
    data = rng.normal(d, 1.0, size=(2000, n))  # units with sd 1: the effect is the mean itself
    t_power = float((stats.ttest_1samp(data, 0.0, axis=1).pvalue <= alpha).mean())
    assert t_power == pytest.approx(0.8, abs=0.03)  # 2000 draws: sd of the estimate 0.009
    flips = [sign_flip_test(x, 0.0) <= alpha for x in data[:400]]
    assert float(np.mean(flips)) == pytest.approx(0.8, abs=0.07)  # within 3.5 sd of 400 draws


def test_more_units_or_a_looser_level_detect_smaller_effects():
    assert detectable_effect(40) < detectable_effect(20) < detectable_effect(10)
    assert detectable_effect(20, 0.05) < detectable_effect(20, 0.005)
    assert detectable_effect(20, 0.05, 0.9) > detectable_effect(20, 0.05, 0.8)


def test_no_effect_is_detectable_where_no_sign_flip_p_value_reaches_the_level():
    assert detectable_effect(5, 0.05) == math.inf  # the smallest two-sided p-value over 5 units is 1/16
    assert math.isfinite(detectable_effect(6, 0.05))  # 1/32 <= 0.05
    assert detectable_effect(8, 0.005) == math.inf and math.isfinite(detectable_effect(9, 0.005))
    assert detectable_effect(1) == math.inf and detectable_effect(0) == math.inf


@pytest.mark.parametrize(
    ("n", "alpha", "power"), [(-1, 0.05, 0.8), (10, 0.0, 0.8), (10, 0.05, 1.0), (10, 0.5, 0.4)]
)
def test_bad_arguments_are_refused(n, alpha, power):
    with pytest.raises(ValueError, match="give"):
        detectable_effect(n, alpha, power)
