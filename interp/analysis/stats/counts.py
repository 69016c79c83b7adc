"""Counts of right answers out of independent trials: the Wilson interval and the exact binomial test.

Both are ``scipy.stats.binomtest``'s (Wilson 1927's score interval, which stays inside [0, 1] and keeps close to
its nominal coverage at small n and near 0 or 1, where the normal interval does not). They count every trial
as independent: where trials come in groups that are not (a schema's twins), make each group one trial (a twin
pair right in both twins, chance 0.25 for random choices) or use the grouped tests in
:mod:`~interp.analysis.stats.sign_flip` and :mod:`~interp.analysis.stats.permutation`.
"""

from __future__ import annotations

import math
from typing import Literal


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` trials; 95% with the default ``z``.

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]

    Raises:
        ValueError: ``n`` is not positive or ``successes`` is not in ``0..n``.
    """
    from scipy import stats  # scipy.stats takes a second to import: only when a statistic is asked for

    _check_counts(successes, n)
    level = math.erf(z / math.sqrt(2))  # the two-sided coverage of +-z standard normal
    found = stats.binomtest(successes, n).proportion_ci(confidence_level=level, method="wilson")
    low = 0.0 if successes == 0 else max(0.0, float(found.low))  # exactly 0 and 1 at the ends
    high = 1.0 if successes == n else min(1.0, float(found.high))
    return low, high


def binomial_test(
    successes: int,
    n: int,
    p: float = 0.5,
    *,
    alternative: Literal["two-sided", "greater", "less"] = "two-sided",
) -> float:
    """The exact binomial test's p-value for ``successes`` out of ``n`` independent trials against success
    probability ``p`` (``scipy.stats.binomtest``): the test for right-or-wrong answers at any chance level.

    Two-sided, it is the probability of every outcome no more likely than the one observed; ``"greater"`` is
    P(X >= successes), ``"less"`` is P(X <= successes). With no trials it is 1.

    >>> round(binomial_test(9, 10), 4)
    0.0215
    >>> round(binomial_test(0, 10, 0.25), 3)  # 0 of 10 where chance is a quarter: no evidence at 0.05
    0.076

    Raises:
        ValueError: ``n`` is negative, ``successes`` is not in ``0..n``, ``p`` is not strictly between 0
            and 1, or ``alternative`` is not one of the three.
    """
    from scipy import stats

    if n == 0 and successes == 0:
        return 1.0
    _check_counts(successes, n)
    if not 0 < p < 1:
        raise ValueError(f"p={p}; the success probability must be strictly between 0 and 1")
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative={alternative!r}; use 'two-sided', 'greater' or 'less'")
    return float(stats.binomtest(successes, n, p, alternative=alternative).pvalue)


def _check_counts(successes: int, n: int) -> None:
    if n <= 0:
        raise ValueError(f"n={n}; a confidence interval or test needs at least one trial")
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} is not between 0 and n={n}")
