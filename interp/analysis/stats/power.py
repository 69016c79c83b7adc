"""What a test over few units could have found: the smallest effect it detects with a given probability.

A negative result is only as strong as the test's power. :func:`detectable_effect` answers "how large a mean
(in units of one unit's standard deviation) would this test have found 80% of the time?" for a two-sided test of
a mean over ``n`` independent units at level ``alpha``: the one-sample t-test's, from the noncentral t
distribution (``scipy.stats.nct``). The sign-flip test over normal units has nearly the same power (a test
checks it by simulation), except that it cannot reject at all where its smallest two-sided p-value, ``2 / 2**n``,
exceeds ``alpha``: the answer is then infinite. Multiply by the units' standard deviation for the effect in the
data's own units.
"""

from __future__ import annotations

import math


def detectable_effect(n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The standardized mean (mean / sd of one unit) that a two-sided test over ``n`` units at level ``alpha``
    detects with probability ``power`` (see the module's description); ``inf`` where no effect can be detected.

    >>> round(detectable_effect(20), 3)  # 20 pairs, 5%, 80% power: about two thirds of a standard deviation
    0.66
    >>> detectable_effect(5)  # 5 units: no sign-flip p-value reaches 0.05
    inf

    Raises:
        ValueError: ``n`` is negative, or ``alpha`` or ``power`` is not strictly between 0 and 1, or ``power``
            is not above ``alpha`` (every test reaches ``alpha`` at no effect).
    """
    from scipy import optimize, stats

    if n < 0:
        raise ValueError(f"n={n}; give the number of independent units, 0 or more")
    if not (0 < alpha < 1 and alpha < power < 1):
        raise ValueError(f"alpha={alpha}, power={power}; give 0 < alpha < power < 1, such as 0.05 and 0.8")
    if n < 2 or 2.0 ** (1 - n) > alpha:
        return math.inf
    df, root = n - 1, math.sqrt(n)
    critical = stats.t.ppf(1 - alpha / 2, df)

    def shortfall(d: float) -> float:
        shift = d * root
        upper = float(stats.nct.sf(critical, df, shift))
        lower = float(stats.nct.cdf(-critical, df, shift))  # scipy answers NaN far in this tail: it is ~0
        upper = upper if math.isfinite(upper) else float(shift > critical)
        return upper + (lower if math.isfinite(lower) else 0.0) - power

    high = 1.0
    while shortfall(high) < 0:
        high *= 2
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-10))
