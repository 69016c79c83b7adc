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


def switch_tracking(pairs: list, indices: list[int]) -> np.ndarray:
    """``[layer, head]`` mean over the pairs of the smaller of the two twins' preferences: positive when the
    head prefers each twin's own referent, so its preference flips with the switch word."""
    mins = [np.minimum(a.preference, b.preference) for _, (a, b), _ in (pairs[i] for i in indices)]
    return np.mean(mins, axis=0)


def overview(pairs: list, select: list[int], test: list[int], top: int = 10) -> list[dict]:
    """The ``top`` heads by how many test pairs they get right in both twins, with their selection numbers."""
    right = sum(
        ((a.preference > 0) & (b.preference > 0)).astype(int) for _, (a, b), _ in (pairs[i] for i in test)
    )
    tracking = switch_tracking(pairs, select) if select else np.full(right.shape, np.nan)
    order = np.argsort(-right.flatten(), kind="stable")[:top]
    rows = []
    for flat in order:
        layer, head = divmod(int(flat), right.shape[1])
        rows.append(
            {
                "head": f"L{layer}H{head}",
                "right in both (test pairs)": int(right[layer, head]),
                "of": len(test),
                "right in both (selection pairs)": int(right_in_both(pairs, select)[layer, head])
                if select
                else 0,
                "tracking (selection)": float(tracking[layer, head]),
            }
        )
    return rows


def right_in_both(pairs: list, indices: list[int]) -> np.ndarray:
    """``[layer, head]`` how many of the pairs have the head preferring each twin's own referent."""
    return sum(
        ((a.preference > 0) & (b.preference > 0)).astype(int) for _, (a, b), _ in (pairs[i] for i in indices)
    )


def choose_heads(
    pairs: list, select: list[int], fixed: list[tuple[int, int]], n: int
) -> list[tuple[int, int]]:
    """``fixed`` plus the ``n`` heads right in both twins on the most selection pairs (ties: the better
    switch tracking)."""
    heads = list(fixed)
    if not select or n < 1:
        return heads
    counts, tracking = right_in_both(pairs, select), switch_tracking(pairs, select)
    order = np.lexsort((-tracking.flatten(), -counts.flatten()))  # by count, then tracking
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
                    "query_terms": split_["query_terms"],
                    "key_terms": split_["key_terms"],
                    "top": split_["top"],
                    "best_pair": split_["best_pair"],
                    "after_top": float(after[1]),
                    "after_random": after[2:].tolist(),
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
    """Pooled shares (each group's terms over the preferences, summed over twins) and the intervention: the
    change of the preference (score units), the pooled fraction left, and how often it shrank or flipped."""
    if not records:
        return {}
    clean = np.array([r["preference"] for r in records])
    out = {
        "n_twins": len(records),
        "clean_preference": float(clean.mean()),
        "query_shares": _pooled(records, "query_terms", QUERY_GROUPS),
        "key_shares": _pooled(records, "key_terms", KEY_GROUPS),
    }
    top = np.array([r["after_top"] for r in records])
    random_ = [(r["preference"], a) for r in records for a in r["after_random"]]
    for name, before, after in (
        ("top", clean, top),
        ("random", np.array([b for b, _ in random_]), np.array([a for _, a in random_])),
    ):
        if not len(after):  # no components to draw from (a layer-0 query)
            out[name] = {"n": 0}
            continue
        mean, lo, hi = _bootstrap(after - before, seed)
        shrunk, flipped = int((after < before).sum()), int((after < 0).sum())
        out[name] = {
            "n": len(after),
            "change": mean,
            "change_ci": (lo, hi),
            "left": float(after.mean() / before.mean()),
            "shrunk": shrunk / len(after),
            "shrunk_ci": wilson_interval(shrunk, len(after)),
            "flipped": flipped / len(after),
            "flipped_ci": wilson_interval(flipped, len(after)),
        }
    return out


def _pooled(records: list[dict], key: str, groups: tuple[str, ...]) -> dict[str, float]:
    """Each group's terms summed over the twins, over the preferences summed over the twins."""
    total = sum(r["qk_total"] for r in records)
    return {g: sum(r[key][g] for r in records) / total for g in groups}


def _bootstrap(values: np.ndarray, seed: int) -> tuple[float, float, float]:
    if len(values) < 2:
        return float(values.mean()), float("nan"), float("nan")
    return bootstrap_mean_interval(values, n_boot=2000, seed=seed)
