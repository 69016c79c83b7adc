"""Which heads attend to the referent: per-head antecedent accuracy, selected on half the schemas and tested
on the other half, with a Holm correction over every head tested.

A held-out accuracy's interval is a bootstrap over the test schemas, a schema's twins resampled together, and
its p-value a sign-flip test over the same schemas: the twins of a pair are not independent (before the switch
word a causal model's patterns are the same in both). A head is *above chance* only when its Holm-adjusted test
passes, its accuracy is above 0.5 and that interval
lies above 0.5 (column ``above_chance``); the report's lines say "above chance" from this column alone.

A head "picks" the candidate (or the antecedent rather than the distractor) that receives more of its
attention mass from a query position; its antecedent accuracy is the fraction of items where that pick is
the referent. In a causal model a query before the switch word cannot see it, so its pattern is the same in
both twins while the answer flips: on such pairs every head is right exactly once, accuracy 0.5 by
construction. :func:`twin_difference` checks that numerically.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from interp.analysis import bootstrap_mean_interval, holm, sign_flip_test, twin_difference_test
from studies.coreference.measure import BY, Measured


def picks(measured: Sequence[Measured], targets: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per item, query role, measure and head: whether the referent got more mass, and the margin.

    Args:
        targets: per item, the key index of the referent (the other of the two keys is the foil).

    Returns:
        ``(right, margin)``, both ``[item, query, by, n_layers, n_heads]``; ``right`` is NaN where a role or
        key is missing.
    """
    mass = np.stack([m.mass for m in measured])  # [item, query, key, by, layer, head]
    idx = np.asarray(targets)
    rows = np.arange(len(idx))
    referent, foil = mass[rows, :, idx], mass[rows, :, 1 - idx]  # [item, query, by, layer, head]
    margin = referent - foil
    right = np.where(np.isnan(margin), np.nan, (margin > 0).astype(float))
    return right, margin


def head_accuracy(right: np.ndarray) -> np.ndarray:
    """``[query, by, n_layers, n_heads]`` mean of ``right`` over items (NaN items skipped; NaN where every
    item is, e.g. one-person agreement prompts have no distractor)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "mean of empty slice": the NaN is the answer
        return np.nanmean(right, axis=0)


def select_and_test(
    right: np.ndarray,
    margin: np.ndarray,
    select: np.ndarray,
    queries: Sequence[str],
    top_k: int = 5,
    *,
    groups: Sequence | np.ndarray | None = None,
    seed: int = 0,
    pairs: Sequence[tuple[int, int]] = (),
) -> pd.DataFrame:
    """Rank heads by accuracy on the ``select`` items; test the top ``top_k`` on the rest.

    With twin ``pairs`` (indices of comparable twins), each tested head also gets its switch sensitivity on the
    held-out pairs (:mod:`studies.data.switch`): per pair, the sum of the twins' margins (mass on each twin's
    referent minus mass on the other candidate), the twin difference of its attention toward the expected
    referent, tested by sign flips over pairs (``sens``, ``sens_low``, ``sens_high``, ``sens_p``, Holm-adjusted
    over the same family as ``sens_p_holm``, and ``sensitive``: Holm p < 0.05 and the interval above 0). A head
    that gives one candidate more mass in both twins is right in one twin of each pair (accuracy 0.5) however
    much the switch word moves it; its sensitivity shows that movement.

    Ties in accuracy are broken by the mean margin. The p-values test held-out accuracy against 0.5,
    two-sided, by flipping the sign of each held-out schema's deviation (:func:`~interp.analysis.sign_flip_test`,
    exact for right-or-wrong values; a schema's twins are one unit, not two trials), and are Holm-adjusted over every
    test made here (``top_k`` heads for each query role and measure): the family is the whole table, the set a
    reader scans for a hit.
    The interval is a 95% bootstrap (2,000 resamples, ``seed``) of the test items, whole ``groups`` (one schema
    id per item) at a time; without ``groups`` every item is its own. ``above_chance``: Holm p < 0.05 and the
    interval above 0.5.
    """
    rows = []
    test = ~select
    labels = np.arange(len(select)) if groups is None else np.asarray(groups)
    held_out = [(a, b) for a, b in pairs if test[a] and test[b]]
    n_layers, n_heads = right.shape[-2:]
    for qi, query in enumerate(queries):
        for bi, by in enumerate(BY):
            r_sel, r_test = right[select, qi, bi], right[test, qi, bi]  # [item, layer, head]
            if np.isnan(r_sel).all() or np.isnan(r_test).all():
                continue
            score = np.nanmean(r_sel, 0) + 1e-6 * np.tanh(np.nanmean(margin[select, qi, bi], 0))
            order = np.argsort(-score.flatten(), kind="stable")[:top_k]
            found = []
            for rank, flat in enumerate(order):
                layer, head = divmod(int(flat), n_heads)
                column = r_test[:, layer, head]
                kept = ~np.isnan(column)
                column, schema = column[kept], labels[test][kept]
                k, n = int(column.sum()), len(column)
                _, low, high = bootstrap_mean_interval(column, 2000, seed, groups=schema)
                found.append(
                    {
                        "query": query,
                        "by": by,
                        "rank": rank + 1,
                        "layer": layer,
                        "head": head,
                        "select_accuracy": float(np.nanmean(r_sel[:, layer, head])),
                        "test_accuracy": k / n,
                        "test_ci_low": low,
                        "test_ci_high": high,
                        "test_n": n,
                        "test_schemas": len(set(schema.tolist())),
                        "p": sign_flip_test(column, 0.5, groups=schema),
                        **_sensitivity(margin[:, qi, bi, layer, head], held_out, labels, seed),
                    }
                )
            rows += found
    for row, adjusted in zip(rows, holm([r["p"] for r in rows]), strict=True):
        row["p_holm"] = adjusted
        row["above_chance"] = bool(adjusted < 0.05 and row["test_ci_low"] > 0.5)
    tested = [r for r in rows if "sens_p" in r]
    for row, adjusted in zip(tested, holm([r["sens_p"] for r in tested]), strict=True):
        row["sens_p_holm"] = adjusted
        row["sensitive"] = bool(adjusted < 0.05 and row["sens_low"] > 0)
    return pd.DataFrame(rows)


def _sensitivity(margin: np.ndarray, pairs: Sequence[tuple[int, int]], labels: np.ndarray, seed: int) -> dict:
    """One head's switch sensitivity over held-out twin ``pairs``: per pair the sum of the twins' margins
    (``margin [item]``, toward each twin's own referent), by sign flips over pairs (a schema's pairs
    together); nothing when no pair has both margins."""
    values = [margin[a] + margin[b] for a, b in pairs]
    kept = [k for k, v in enumerate(values) if np.isfinite(v)]
    if not kept:
        return {}
    found = twin_difference_test([values[k] for k in kept], [labels[pairs[k][0]] for k in kept], seed=seed)
    return {
        "sens": found.estimate,
        "sens_low": found.interval.low,
        "sens_high": found.interval.high,
        "sens_pairs": len(kept),
        "sens_p": found.p_value,
    }


def twin_difference(
    measured: Sequence[Measured],
    pairs: Sequence[tuple[int, int]],
    aligned: Sequence[bool],
    query: int,
    role: str,
) -> dict[str, float | int]:
    """Largest difference between twins, at a query role, of the heads' masses and of the residual stream.

    Args:
        pairs: comparable twin pairs, as indices into ``measured``.
        aligned: per pair, whether the twins' texts agree up to the end of the pronoun (the switch comes
            after it).

    Returns ``pairs`` (twin pairs compared, split by whether the switch comes after the pronoun) and the
    largest absolute differences ``mass_after``/``resid_after`` and ``mass_before``/``resid_before``.
    """
    out: dict[str, float | int] = {}
    for label, after in (("after", True), ("before", False)):
        mass_d, resid_d, n = 0.0, 0.0, 0
        for (a, b), is_after in zip(pairs, aligned, strict=True):
            if is_after != after:
                continue
            n += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a role both twins lack: all NaN
                diff = np.nanmax(np.abs(measured[a].mass[query] - measured[b].mass[query]))
            mass_d = max(mass_d, float(np.nan_to_num(diff)))
            if role in measured[a].features:
                diff = np.abs(measured[a].features[role] - measured[b].features[role])
                resid_d = max(resid_d, float(diff.max()))
        stored = bool(measured) and role in measured[0].features
        out.update(
            {f"pairs_{label}": n, f"mass_{label}": mass_d, f"resid_{label}": resid_d if stored else None}
        )
    return out
