"""Which units carry the twin difference: chosen on one half of the schemas, tested on the other half, against
controls matched on influence and, separately, on activation.

A *unit* is a head (its carry of the candidates' edges into the answer) or a query-node term (a (layer,
feature)'s part of a head's preference for one candidate's key). Each twin pair gives every unit one value, its
twin difference, signed so that positive is toward the expected referent (zero where the unit is absent); the
question is whether some units carry the switch consistently across schemas.

Selection, on the selection half only: the ``k`` units with the largest positive mean. Each selected unit gets
two controls, fixed there too: the ``pool`` other units (of its stratum, where units have strata: terms of the
same head) nearest to it in mean influence, and the ``pool`` nearest in mean activation; a control's value in a
pair is its pool's mean.

Test, on the other half only: per pair, the mean of the selected units (``selected``) and its excess over each
control (``vs influence``, ``vs activation``), each against 0 by sign flips over the pairs (each pair one
schema: its twins are one unit), with the interval that inverts the test. With no consistent mechanism a
selected unit is, on the test half, like any other unit of its influence (activation), so the excess is
symmetric around 0 there. Chosen and tested on the same half, the excess would be large with no mechanism at
all: the largest of many noisy means. Beside each test, a count with its chance: the test pairs in which the
selected units' mean is positive (beats the control), against 0.5 (exact binomial test).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from interp.analysis.stats import binomial_test, twin_difference_test

COVARIATES = ("influence", "activation")


@dataclass(frozen=True)
class Selected:
    """Units chosen on the selection half.

    Attributes:
        units: the chosen units' indices, the largest selection-half mean first.
        means: their selection-half means.
        controls: covariate -> per chosen unit, the indices of its control pool.
    """

    units: tuple[int, ...]
    means: tuple[float, ...]
    controls: dict[str, tuple[tuple[int, ...], ...]]


def select(
    values: np.ndarray,
    rows: np.ndarray,
    k: int,
    covariates: dict[str, np.ndarray],
    pool: int,
    strata: Sequence[Hashable] | None = None,
) -> Selected:
    """The ``k`` units with the largest positive mean over ``rows`` of ``values [pair, unit]`` and, per
    covariate (``[pair, unit]`` each), their control pools matched on its mean over the same rows.

    Raises:
        ValueError: ``rows`` selects no pair, ``k`` or ``pool`` is below 1, or shapes disagree.
    """
    if not rows.any() or k < 1 or pool < 1:
        raise ValueError(
            f"selection over {int(rows.sum())} pairs, k={k}, pool={pool}: give pairs, k >= 1, pool >= 1"
        )
    for name, c in covariates.items():
        if c.shape != values.shape:
            raise ValueError(f"covariate {name!r} has shape {c.shape}; values have {values.shape}")
    mean = values[rows].mean(0)  # [unit]
    order = [int(u) for u in np.argsort(-mean, kind="stable") if mean[u] > 0][:k]
    stratum = list(range(values.shape[1])) if strata is None else list(strata)
    controls = {}
    for name, c in covariates.items():
        level = c[rows].mean(0)  # [unit]
        pools = []
        for u in order:
            others = [
                v
                for v in range(values.shape[1])
                if v not in order and (strata is None or stratum[v] == stratum[u])
            ]
            near = sorted(others, key=lambda v: (abs(level[v] - level[u]), v))[:pool]
            pools.append(tuple(near))
        controls[name] = tuple(pools)
    return Selected(tuple(order), tuple(float(mean[u]) for u in order), controls)


def test(values: np.ndarray, rows: np.ndarray, selected: Selected, seed: int = 0) -> dict[str, dict]:
    """The selected units on the pairs ``rows`` (the test half): ``selected`` and ``vs COVARIATE``, each with
    its per-pair values, the sign-flip comparison against 0 (a :class:`Comparison`), their standard deviation,
    and the count of positive pairs against chance 0.5. Empty when nothing was selected (a control with an
    empty pool counts as 0)."""
    if not selected.units or not rows.any():
        return {}
    part = values[rows]  # [test pair, unit]
    mine = part[:, list(selected.units)].mean(1)  # [test pair]
    out = {"selected": _tested(mine, seed)}
    for name, pools in selected.controls.items():
        control = np.mean([part[:, list(p)].mean(1) if p else np.zeros(len(part)) for p in pools], axis=0)
        out[f"vs {name}"] = _tested(mine - control, seed)
    return out


def _tested(x: np.ndarray, seed: int) -> dict:
    n, positive = len(x), int((x > 0).sum())
    return {
        "values": [float(v) for v in x],
        "comparison": twin_difference_test(x, seed=seed) if n >= 1 else None,
        "sd": float(np.std(x, ddof=1)) if n > 1 else float("nan"),
        "positive": positive,
        "n": n,
        "chance": 0.5,
        "binomial_p": binomial_test(positive, n, 0.5),
    }


def held_out(
    values: np.ndarray,
    rows: np.ndarray,
    k: int,
    covariates: dict[str, np.ndarray],
    pool: int,
    names: Sequence[str],
    seed: int = 0,
    strata: Sequence[Hashable] | None = None,
    tested: np.ndarray | None = None,
) -> tuple[Selected, dict]:
    """:func:`select` on the pairs ``rows`` and :func:`test` on the others (``tested``: other pairs to test on,
    for a check that choosing and testing on one half finds a mechanism in noise); with the record a report
    reads: the chosen units by name with their means on each half and their controls, and the tests."""
    tested = ~rows if tested is None else tested
    chosen = select(values, rows, k, covariates, pool, strata)
    test_mean = values[tested].mean(0) if tested.any() else np.full(values.shape[1], np.nan)
    record = {
        "units": [
            {
                "name": names[u],
                "selection_mean": m,
                "test_mean": float(test_mean[u]),
                "controls": {c: [names[v] for v in pools[i]] for c, pools in chosen.controls.items()},
            }
            for i, (u, m) in enumerate(zip(chosen.units, chosen.means, strict=True))
        ],
        "n_units": values.shape[1],
        "test": test(values, tested, chosen, seed),
        "selection_pairs": int(rows.sum()),
        "test_pairs": int(tested.sum()),
    }
    return chosen, record
