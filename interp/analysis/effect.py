"""The normalised effect ``(x - corrupt) / (clean - corrupt)``: how much of the clean metric an edit brings back.

Patching, attribution, SAE feature attribution and circuit faithfulness all report a change of a metric over
the gap between the clean and the corrupted runs: 0 means the edit brings nothing back, 1 all of it. When the
two runs agree the ratio means nothing, and a gap of float noise would turn it into a huge number, so one test
decides for all of them: the runs agree when ``|clean - corrupt| <= 1e-12 * max(1, |clean|)``, and then the
effect is NaN, with a warning that says why.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

T = TypeVar("T")


def normalised_effect(delta: T, clean: float, corrupt: float, *, what: str = "the normalised effect") -> T:
    """``delta / (clean - corrupt)``, or NaN with a warning when the clean and corrupted metrics agree.

    ``delta`` (an edited run's metric minus the corrupted one) may be a number, an array or a Series; the
    result has its type. ``what`` names the quantity in the warning.

    >>> normalised_effect(1.5, clean=4.0, corrupt=1.0)
    0.5
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     normalised_effect(1.5, clean=2.0, corrupt=2.0)
    nan
    """
    gap = clean - corrupt
    if abs(gap) <= 1e-12 * max(1.0, abs(clean)):
        warnings.warn(
            f"the metric is {clean} on both the clean and the corrupted run, so {what} is undefined (NaN); "
            "choose inputs or a metric that tell the runs apart",
            stacklevel=3,
        )
        gap = float("nan")
    return delta / gap
