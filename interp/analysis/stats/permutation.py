"""Two sets compared by permuting their labels over whole groups (``scipy.stats.permutation_test``).

Where each group carries one label (every twin of a schema in one condition), the group's mean is one unit and
the labels are shuffled over units, so twins count once. The test needs no symmetry and no chance level: it
compares right-or-wrong values as well as measurements (a model's accuracy on one set of schemas against
another, the effect of named nodes against random ones drawn per schema).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from interp.analysis.stats.intervals import _floats
from interp.analysis.stats.results import Comparison


def label_permutation_test(
    values: Sequence[float] | np.ndarray,
    labels: Sequence[Hashable] | np.ndarray,
    groups: Sequence | np.ndarray | None = None,
    *,
    alternative: Literal["two-sided", "greater", "less"] = "two-sided",
    n_resamples: int = 9999,
    seed: int = 0,
) -> Comparison:
    """Is the mean of the first label's units different from the second's?

    ``labels`` names one of two sets per value (the first label met is the first set); ``groups`` (one per
    value) joins values that are not independent, and every value of a group must carry one label. Each group's
    mean is a unit; the estimate is the mean of the first set's units minus the second's, and its p-value counts
    the reassignments of labels to units (the set sizes kept) whose difference is as extreme (two-sided: twice
    the smaller one-sided p-value, as ``scipy.stats.permutation_test`` has it). Exact when there
    are at most ``n_resamples`` reassignments (6 units against 6: 924), otherwise estimated from seeded random
    ones. ``"greater"``: the first set's mean is larger.

    >>> found = label_permutation_test([3.0, 3.2, 2.9, 1.0, 1.2, 0.8], ["a", "a", "a", "b", "b", "b"])
    >>> round(found.estimate, 4), found.p_value, found.exact  # the largest of 20 splits, either way: 2/20
    (2.0333, 0.1, True)

    Raises:
        ValueError: ``labels`` or ``groups`` do not give one entry per value, there are not exactly two labels,
            or a group mixes labels.
    """
    from scipy import stats  # scipy.stats takes a second to import: only when a statistic is asked for

    x = _floats(values)
    tags = list(labels)
    if len(tags) != len(x):
        raise ValueError(f"{len(tags)} labels for {len(x)} values; give one label per value")
    names = list(dict.fromkeys(tags))
    if len(names) != 2:
        raise ValueError(f"labels name {len(names)} sets ({names[:5]}); give exactly two")
    ids = np.arange(len(x)) if groups is None else np.asarray(groups)
    if ids.shape != x.shape:
        raise ValueError(f"groups has shape {ids.shape} but values {x.shape}; give one group label per value")
    first = np.array([t == names[0] for t in tags])
    keys, index = np.unique(ids, return_inverse=True)
    means = np.bincount(index, weights=x) / np.bincount(index)  # [group]
    share = np.bincount(index, weights=first.astype(float)) / np.bincount(index)
    mixed = keys[(share > 0) & (share < 1)]
    if len(mixed):
        raise ValueError(
            f"group {mixed[0].tolist()!r} holds values of both labels; each group must be in one set (to compare "
            "twins with each other, test their differences with twin_difference_test)"
        )
    a, b = means[share == 1], means[share == 0]
    found = stats.permutation_test(
        (a, b),
        lambda u, v, axis=-1: u.mean(axis) - v.mean(axis),
        permutation_type="independent",
        vectorized=True,
        n_resamples=n_resamples,
        alternative=alternative,
        rng=seed,
    )
    total = math.comb(len(a) + len(b), len(a))
    return Comparison(
        float(a.mean() - b.mean()),
        float(found.pvalue),
        len(a) + len(b),
        total <= n_resamples,
        f"label permutations over {len(a)} against {len(b)} groups",
    )
