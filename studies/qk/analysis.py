"""The study's reductions: the split by schema, the choice of heads, and per head the splits and interventions."""

from __future__ import annotations

import random

import numpy as np

from interp.analysis import bootstrap_mean_interval, wilson_interval
from studies.qk.measure import KEY_GROUPS, QUERY_GROUPS, intervene, matched_random, split_preference


def split(pairs: list, seed: int) -> tuple[list[int], list[int]]:
    """Pair indices that select heads and those that test them, by schema; the seed's pair is always tested."""
    schemas = sorted({schema for _, _, schema in pairs if schema != "seed"})
    random.Random(seed).shuffle(schemas)
    chosen = set(schemas[: len(schemas) // 2])
    select = [i for i, (_, _, s) in enumerate(pairs) if s in chosen]
    return select, [i for i in range(len(pairs)) if i not in select]


def right_in_both(pairs: list, indices: list[int]) -> np.ndarray:
    """``[layer, head]`` how many of the pairs have the head preferring the referent in both twins."""
    return sum(
        ((a.preference > 0) & (b.preference > 0)).astype(int) for _, (a, b), _ in (pairs[i] for i in indices)
    )


def choose_heads(
    pairs: list, select: list[int], fixed: list[tuple[int, int]], n: int
) -> list[tuple[int, int]]:
    """``fixed`` plus the ``n`` heads right in both twins on the most selection pairs (ties: lower layer)."""
    counts = right_in_both(pairs, select) if select else None
    heads = list(fixed)
    if counts is not None:
        order = np.argsort(-counts.flatten(), kind="stable")
        for flat in order:
            head = divmod(int(flat), counts.shape[1])
            if len(heads) >= len(fixed) + n:
                break
            if head not in heads:
                heads.append(head)
    return heads


def head_result(model, pairs: list, test: list[int], layer: int, head: int, config, rng) -> dict:
    """Per test pair where the head flips correctly: the QK split and the intervention, and their pooling."""
    records = []
    n_flip = 0
    for index in test:
        ids, twins, _ = pairs[index]
        prefs = [float(t.preference[layer, head]) for t in twins]
        if not all(p > 0 for p in prefs):
            continue
        n_flip += 1
        for twin in twins:
            split_ = split_preference(model, twin, layer, head, config.top)
            sets = [
                split_["top_index"],
                *matched_random(split_["parts"], split_["top_index"], config.random_draws, rng),
            ]
            after = intervene(model, twin, layer, head, split_["parts"], sets)
            records.append(
                {
                    "pair": "/".join(ids),
                    "text": twin.text,
                    "preference": after[0],
                    "qk_total": split_["total"],
                    "query_shares": split_["query_shares"],
                    "key_shares": split_["key_shares"],
                    "top": split_["top"],
                    "best_pair": split_["best_pair"],
                    "remaining_top": after[1] / after[0],
                    "remaining_random": (after[2:] / after[0]).tolist(),
                }
            )
    return {
        "head": f"L{layer}H{head}",
        "n_test_pairs": len(test),
        "n_flipping_pairs": n_flip,
        "seed_flips": bool(all(t.preference[layer, head] > 0 for t in pairs[0][1])),
        "records": records,
        "summary": summarise(records, config.seed),
    }


def summarise(records: list[dict], seed: int) -> dict:
    """Mean shares, and the intervention's remaining fraction and flip rate, top against random."""
    if not records:
        return {}
    top = np.array([r["remaining_top"] for r in records])
    random_ = np.array([np.mean(r["remaining_random"]) for r in records if r["remaining_random"]])
    all_random = np.array([v for r in records for v in r["remaining_random"]])
    out = {
        "n_twins": len(records),
        "query_shares": {g: float(np.mean([r["query_shares"][g] for r in records])) for g in QUERY_GROUPS},
        "key_shares": {g: float(np.mean([r["key_shares"][g] for r in records])) for g in KEY_GROUPS},
    }
    for name, values, flips in (("top", top, top < 0), ("random", random_, all_random < 0)):
        if not len(values):  # no components to draw from (a layer-0 query)
            nan = float("nan")
            out[name] = {
                "remaining": nan,
                "remaining_ci": (nan, nan),
                "flipped": nan,
                "flipped_ci": (nan, nan),
            }
            out[name]["n"] = 0
            continue
        mean, lo, hi = _bootstrap(values, seed)
        f_lo, f_hi = wilson_interval(int(flips.sum()), len(flips))
        out[name] = {
            "remaining": mean,
            "remaining_ci": (lo, hi),
            "flipped": float(flips.mean()),
            "flipped_ci": (f_lo, f_hi),
            "n": len(flips),
        }
    return out


def _bootstrap(values: np.ndarray, seed: int) -> tuple[float, float, float]:
    if len(values) < 2:
        return float(values.mean()), float("nan"), float("nan")
    return bootstrap_mean_interval(values, n_boot=2000, seed=seed)
