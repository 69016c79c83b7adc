"""Intervals, tests and corrections: the statistics studies report next to their numbers.

Every tool here counts independent units. Values that are not independent (the twins of one schema, which
share every token before the switch word; the rows of one prompt) come with ``groups``, and the evidence
counts groups, not values. Which tool for which number:

- a mean over groups: :func:`group_interval`, the t-interval over groups by default, which keeps its coverage
  at few groups where a bootstrap does not (below :data:`MIN_GROUPS`, a bootstrap is marked exploratory);
- a paired twin difference (the preference for the expected answer in one twin minus the other's):
  :func:`twin_difference_test`, sign flips over pairs with the interval that inverts them;
- a mean against a value it is symmetric around under the null: :func:`sign_flip_test`, and
  :func:`sign_flip_interval`; right-or-wrong values only at 0.5;
- right-or-wrong answers at any chance level: :func:`binomial_test` over independent units (one per group),
  :func:`wilson_interval` for their proportion;
- two sets of groups against each other: :func:`label_permutation_test`;
- many tests or intervals read together: :func:`correct_tests` (Holm) and :func:`correct_intervals`
  (Bonferroni), which return what they corrected (:class:`Correction`);
- what a test over so many units could have found (a negative result's power): :func:`detectable_effect`.

Results carry how they were computed (:class:`Interval`, :class:`Comparison`), so a report can print the method
and whether a figure is exploratory. ``scipy.stats`` does the work where it does it well (``binomtest``, the t
distribution, ``bootstrap`` with BCa, ``permutation_test``); the sign-flip enumeration and Holm's correction are
written here (see their modules for why). :func:`bootstrap_mean_interval` and :func:`mean_interval` keep the
tuple form their callers use.
"""

from interp.analysis.stats.counts import binomial_test, wilson_interval
from interp.analysis.stats.family import Correction, correct_intervals, correct_tests, holm
from interp.analysis.stats.intervals import (
    bootstrap_interval,
    bootstrap_mean_interval,
    group_interval,
    mean_interval,
)
from interp.analysis.stats.permutation import label_permutation_test
from interp.analysis.stats.power import detectable_effect
from interp.analysis.stats.results import MIN_GROUPS, Comparison, Interval
from interp.analysis.stats.sign_flip import sign_flip_interval, sign_flip_test, twin_difference_test

__all__ = [
    "MIN_GROUPS",
    "Comparison",
    "Correction",
    "Interval",
    "binomial_test",
    "bootstrap_interval",
    "bootstrap_mean_interval",
    "correct_intervals",
    "correct_tests",
    "detectable_effect",
    "group_interval",
    "holm",
    "label_permutation_test",
    "mean_interval",
    "sign_flip_interval",
    "sign_flip_test",
    "twin_difference_test",
    "wilson_interval",
]
