"""Causal evidence: patch activations between twins and measure how much of the twin difference comes back.

Twins are natural counterfactuals: they differ only in the switch word (resolution) or the antecedent
(agreement). Each pair is run as a batch of two, clean ``[A, B]`` and corrupt ``[B, A]``, so one patch
measures both directions. The metric is the logit difference between the two answers at the prediction
position (the question prompt's last token for resolution, the next-pronoun position for agreement), signed
so that the clean row's answer is positive. An encoder has no logits; its metric is the projection of the
final stream at the pronoun (resolution) or the last token (agreement) onto the clean-minus-corrupt
difference there, scaled so that clean is 1 and corrupt 0.

Recovery is pooled over pairs as a ratio of sums, ``sum(patched - corrupt) / sum(clean - corrupt)``, which
stays defined when a single pair's twins barely differ. Attribution patching (one gradient) covers the full
sweep; exact patching re-measures the strongest slots.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from interp import distributed
from interp.analysis import attribution_patch, verify_top_k
from studies.data.pairs import Pair


def sweep(model, pairs: Sequence[Pair], roles: Sequence[str], top_positions: int = 3, top_heads: int = 5):
    """Residual-stream patching by layer and position role, and ``hook_z`` patching per head, over all pairs.

    Pairs are shared out among ranks (each pair is computed the same way wherever it runs) and pooled on rank
    0 in pair order, so any number of ranks gives the same numbers. Per pair: one attribution pass per
    sweep, then one batch of exact patches: the pair's ``top_positions`` strongest stream slots and the
    ``top_heads`` heads with the strongest attribution pooled over pairs.

    Returns (rank 0; ``None`` on other ranks) a dict with ``resid`` ``[n_layers, n_roles]`` (attribution
    recovery pooled by role), ``resid_exact`` (per pair, its top slots patched exactly),
    ``resid_denominator``, ``z`` ``[n_layers, n_heads]``, ``z_exact`` (the pooled top heads, attribution
    and exact recovery, pooled over pairs) and ``z_denominator``.
    """
    cfg = model.cfg
    span = distributed.shard_range(len(pairs))
    local = [_head_attribution(model, pairs[i]) for i in span]
    heads = [x for part in distributed.all_gather_objects(local) for x in part]  # every rank, pair order
    z_sums, z_denominator = np.zeros((cfg.n_layers, cfg.n_heads)), 0.0
    for delta, difference in heads:
        z_sums += delta
        z_denominator += difference
    flat = np.argsort(-np.abs(z_sums).flatten(), kind="stable")[:top_heads]
    chosen = [divmod(int(f), cfg.n_heads) for f in flat]
    local = [_resid_and_exact(model, pairs[i], heads[i][0], chosen, top_positions) for i in span]
    parts = distributed.gather_objects(local)
    if parts is None:
        return None
    per_pair = [x for part in parts for x in part]
    sums, denominator, exact = np.zeros((cfg.n_layers, len(roles))), 0.0, []
    totals = dict.fromkeys(chosen, 0.0)
    for pair, (deltas, difference, resid_top, head_top) in zip(pairs, per_pair, strict=True):
        denominator += difference
        for (layer, position), delta in deltas.items():
            sums[layer, roles.index(pair.roles[position])] += delta
        resid_top["pair"] = "/".join(pair.ids)
        resid_top["role"] = [pair.roles[int(p)] for p in resid_top["position"]]
        exact.append(resid_top)
        for key, patched in head_top.items():
            totals[key] += patched
    z_exact = pd.DataFrame(
        [
            {
                "layer": layer,
                "head": head,
                "attribution": z_sums[layer, head] / z_denominator,
                "patched": patched / z_denominator,
            }
            for (layer, head), patched in totals.items()
        ]
    )
    if len(z_exact):
        z_exact = z_exact.sort_values("patched", ascending=False, key=abs, ignore_index=True)
    return {
        "resid": sums / denominator if denominator else sums * np.nan,
        "resid_exact": pd.concat(exact, ignore_index=True) if exact else pd.DataFrame(),
        "resid_denominator": denominator,
        "z": z_sums / z_denominator if z_denominator else z_sums * np.nan,
        "z_exact": z_exact,
        "z_denominator": z_denominator,
    }


def _head_attribution(model, pair: Pair) -> tuple[np.ndarray, float]:
    """``hook_z`` attribution per head ``[n_layers, n_heads]`` and the pair's clean minus corrupt metric."""
    cfg = model.cfg
    frame = attribution_patch(
        model, pair.clean, pair.corrupt, pair.metric, "blocks.{layer}.attn.hook_z", by="head"
    )
    delta = np.zeros((cfg.n_layers, cfg.n_heads))
    delta[frame["layer"].to_numpy(int), frame["head"].to_numpy(int)] = frame["delta"].to_numpy()
    return delta, frame.attrs["clean_metric"] - frame.attrs["corrupt_metric"]


def _resid_and_exact(model, pair: Pair, head_delta: np.ndarray, heads: list, top_positions: int):
    """Stream attribution by layer and position, then one exact patching batch: the pair's strongest stream
    slots and the chosen heads. Returns ``(deltas {(layer, position): delta}, clean - corrupt, stream top
    frame, {(layer, head): patched delta})``."""
    frame = attribution_patch(model, pair.clean, pair.corrupt, pair.metric, "blocks.{layer}.hook_resid_pre")
    deltas = {
        (int(layer), int(position)): float(delta)
        for layer, position, delta in zip(frame["layer"], frame["position"], frame["delta"], strict=True)
    }
    top = frame.reindex(frame["delta"].abs().sort_values(ascending=False).index).head(top_positions)
    difference = frame.attrs["clean_metric"] - frame.attrs["corrupt_metric"]
    head_rows = pd.DataFrame(
        {
            "hook": [f"blocks.{layer}.attn.hook_z" for layer, _ in heads],
            "layer": pd.array([layer for layer, _ in heads], dtype="Int64"),
            "head": pd.array([head for _, head in heads], dtype="Int64"),
            "delta": [head_delta[layer, head] for layer, head in heads],
        }
    )
    head_rows["value"] = head_rows["delta"] / difference
    both = pd.concat([top, head_rows], ignore_index=True)
    checked = verify_top_k(model, pair.clean, pair.corrupt, pair.metric, both, k=len(both))
    is_head = checked["head"].notna()
    resid_top = checked[~is_head].drop(columns="head").reset_index(drop=True)
    resid_top["position"] = resid_top["position"].astype(int)
    head_top = {(int(r.layer), int(r.head)): float(r.patched_delta) for r in checked[is_head].itertuples()}
    return deltas, difference, resid_top, head_top
