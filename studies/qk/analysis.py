"""The study's reductions: the split by schema, the choice of heads, and per head the splits and interventions.

The primary measure is each head's switch sensitivity (:mod:`studies.data.switch`): per pair, its preference
for the first candidate in one twin minus that in the other, signed toward the expected referent (in score
units; 0 is no sensitivity), tested by sign flips over the held-out pairs with its interval, Holm-corrected over
the analysed heads; its bias (the mean preference over both twins) is reported apart. Heads are chosen by their
mean sensitivity on the selection pairs.

Counts and intervals. A head is right on a pair when it prefers each twin's own referent (secondary: it needs
half the sensitivity to exceed the bias); with random signs
that happens on 25% of pairs (:data:`CHANCE`), the level every count is read against. The seed's pair is its
own: it is neither a selection nor a test pair, and it is reported beside them, once. Intervals resample
schemas, the twins of a pair (and the random draws on them) together, with
:func:`interp.analysis.bootstrap_mean_interval`.
"""

from __future__ import annotations

import random

import numpy as np

from interp.analysis import binomial_test, bootstrap_mean_interval
from interp.analysis.stats import Correction, correct_tests
from studies.data import switch
from studies.qk.measure import KEY_GROUPS, QUERY_GROUPS, intervene, matched_random, split_preference

CHANCE = switch.BOTH_CHANCE
"""The fraction of pairs right in both twins when each twin's preference has a random sign."""
LABELS = ("the first candidate", "the second")
N_BOOT = 2000


def split(pairs: list, seed: int) -> tuple[list[int], list[int]]:
    """Pair indices that select heads and those that test them, by schema; the seed's pair is in neither."""
    schemas = sorted({schema for _, _, schema in pairs if schema != "seed"})
    random.Random(seed).shuffle(schemas)
    chosen = set(schemas[: len(schemas) // 2])
    select = [i for i, (_, _, s) in enumerate(pairs) if s in chosen]
    return select, [i for i, (_, _, s) in enumerate(pairs) if s != "seed" and i not in select]


def right_fraction(pairs: list, indices: list[int], layer: int, head: int, seed: int) -> dict:
    """How often the head is right in both twins over ``indices``, against :data:`CHANCE`: the count, the
    fraction with its 95% bootstrap interval over schemas (NaN with fewer than two), and the one-sided exact
    binomial p-value of doing better than chance (each pair one trial)."""
    right = [float(all(t.preference[layer, head] > 0 for t in pairs[i][1])) for i in indices]
    k, n = int(sum(right)), len(right)
    schemas = [pairs[i][2] for i in indices]
    low, high = float("nan"), float("nan")
    if len(set(schemas)) > 1:
        _, low, high = bootstrap_mean_interval(right, N_BOOT, seed, groups=schemas)
    p = binomial_test(k, n, CHANCE, alternative="greater")
    fraction = k / n if n else float("nan")
    return {"k": k, "n": n, "fraction": fraction, "ci": (low, high), "chance": CHANCE, "p": p}


def sensitivity(pairs: list, indices: list[int]) -> np.ndarray:
    """``[pair, layer, head]`` each head's switch sensitivity on each pair: the sum of the twins' preferences,
    each toward its own referent (the preference for twin a's referent in a minus that in b)."""
    if not indices:
        return np.zeros((0, *pairs[0][1][0].preference.shape))
    return np.stack([a.preference + b.preference for _, (a, b), _ in (pairs[i] for i in indices)])


def head_switch(
    pairs: list, indices: list[int], layer: int, head: int, seed: int
) -> switch.SwitchSummary | None:
    """The head's switch sensitivity and bias over ``indices`` (sign flips over schemas); ``None`` for no
    pairs."""
    if not indices:
        return None
    scored = [
        switch.switch_from_margins(
            float(a.preference[layer, head]), float(b.preference[layer, head]), a.answer
        )
        for _, (a, b), _ in (pairs[i] for i in indices)
    ]
    groups = [pairs[i][2] for i in indices]
    return switch.summarise(scored, groups, labels=LABELS, unit="score units", seed=seed)


def overview(pairs: list, select: list[int], test: list[int], top: int = 10) -> list[dict]:
    """The ``top`` heads by mean switch sensitivity on the test pairs, with their right-in-both counts and their
    selection numbers.

    Ranked on the test pairs themselves: the best of all heads on these pairs, a description, not a held-out
    estimate (the maximum of many heads' means sits above 0 even when no head is sensitive)."""
    sens = sensitivity(pairs, test).mean(0)  # [layer, head]
    right = right_in_both(pairs, test)
    chosen = sensitivity(pairs, select).mean(0) if select else np.full(sens.shape, np.nan)
    order = np.argsort(-sens.flatten(), kind="stable")[:top]
    rows = []
    for flat in order:
        layer, head = divmod(int(flat), sens.shape[1])
        rows.append(
            {
                "head": f"L{layer}H{head}",
                "sensitivity (test)": float(sens[layer, head]),
                "right in both (test pairs)": int(right[layer, head]),
                "of": len(test),
                "fraction": float(right[layer, head]) / len(test) if test else float("nan"),
                "chance": CHANCE,
                "sensitivity (selection)": float(chosen[layer, head]),
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
    """``fixed`` plus the ``n`` heads with the largest mean switch sensitivity on the selection pairs (ties: more
    pairs right in both twins)."""
    heads = list(fixed)
    if not select or n < 1:
        return heads
    mean, counts = sensitivity(pairs, select).mean(0), right_in_both(pairs, select)
    order = np.lexsort((-counts.flatten(), -mean.flatten()))  # by sensitivity, then count
    for flat in order:
        head = divmod(int(flat), mean.shape[1])
        if len(heads) >= len(fixed) + n:
            break
        if head not in heads:
            heads.append(head)
    return heads


def head_result(model, pairs: list, test: list[int], layer: int, head: int, config, rng) -> dict:
    """The head's switch sensitivity and bias on the test pairs (and on the seed's pair, apart); per test pair
    where it is right in both twins, the QK split and the intervention, and their pooling; how often it is right
    against chance; whether it is right on the seed's pair."""
    records = []
    n_flip = 0
    for index in test:
        ids, twins, schema = pairs[index]
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
                    "schema": schema,
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
    seed_twins = [t for ids, twins, _ in pairs if ids == ("seed",) for t in twins]
    seed_pair = [i for i, (ids, _, _) in enumerate(pairs) if ids == ("seed",)]
    return {
        "head": f"L{layer}H{head}",
        "n_test_pairs": len(test),
        "switch": head_switch(pairs, test, layer, head, config.seed),
        "seed_switch": head_switch(pairs, seed_pair, layer, head, config.seed),
        "n_flipping_pairs": n_flip,
        "right_in_both": right_fraction(pairs, test, layer, head, config.seed),
        "seed_flips": bool(seed_twins) and all(t.preference[layer, head] > 0 for t in seed_twins),
        "seed_preferences": [float(t.preference[layer, head]) for t in seed_twins],
        "records": records,
        "summary": summarise(records, config.seed),
    }


def summarise(records: list[dict], seed: int) -> dict:
    """Pooled shares (each group's terms over the preferences, summed over twins; 95% intervals over schemas)
    and the intervention: the change of the preference (score units), the pooled fraction left, and how often
    it shrank or flipped, each with a 95% interval over schemas (a pair's twins and their random draws
    resampled together)."""
    if not records:
        return {}
    clean = np.array([r["preference"] for r in records])
    schemas = [r.get("schema", r["pair"]) for r in records]
    out = {
        "n_twins": len(records),
        "n_schemas": len(set(schemas)),
        "clean_preference": float(clean.mean()),
        "query_shares": _pooled(records, "query_terms", QUERY_GROUPS),
        "key_shares": _pooled(records, "key_terms", KEY_GROUPS),
        "query_shares_ci": _pooled_ci(records, "query_terms", QUERY_GROUPS, schemas, seed),
        "key_shares_ci": _pooled_ci(records, "key_terms", KEY_GROUPS, schemas, seed),
    }
    top = np.array([r["after_top"] for r in records])
    random_ = [
        (r["preference"], a, g) for r, g in zip(records, schemas, strict=True) for a in r["after_random"]
    ]
    for name, before, after, groups in (
        ("top", clean, top, schemas),
        (
            "random",
            np.array([b for b, _, _ in random_]),
            np.array([a for _, a, _ in random_]),
            [g for *_, g in random_],
        ),
    ):
        if not len(after):  # no components to draw from (a layer-0 query)
            out[name] = {"n": 0}
            continue
        shrunk, flipped = (after < before).astype(float), (after < 0).astype(float)
        mean, lo, hi = _bootstrap(after - before, groups, seed)
        out[name] = {
            "n": len(after),
            "change": mean,
            "change_ci": (lo, hi),
            "left": float(after.mean() / before.mean()),
            "shrunk": float(shrunk.mean()),
            "shrunk_ci": _bootstrap(shrunk, groups, seed)[1:],
            "flipped": float(flipped.mean()),
            "flipped_ci": _bootstrap(flipped, groups, seed)[1:],
        }
    return out


def _pooled(records: list[dict], key: str, groups: tuple[str, ...]) -> dict[str, float]:
    """Each group's terms summed over the twins, over the preferences summed over the twins."""
    total = sum(r["qk_total"] for r in records)
    return {g: sum(r[key][g] for r in records) / total for g in groups}


def _pooled_ci(records: list[dict], key: str, groups: tuple[str, ...], schemas: list, seed: int) -> dict:
    """Each pooled share's 95% interval: schemas resampled, the share of the resample's summed preference."""
    totals = np.array([r["qk_total"] for r in records])  # positive where the head is right in both twins
    if len(set(schemas)) < 2 or (totals <= 0).any():  # a share of totals of both signs has no such interval
        return {g: (float("nan"), float("nan")) for g in groups}
    out = {}
    for g in groups:
        ratio = np.array([r[key][g] for r in records]) / totals
        out[g] = bootstrap_mean_interval(ratio, N_BOOT, seed, groups=schemas, weights=totals)[1:]
    return out


def _bootstrap(values: np.ndarray, groups: list, seed: int) -> tuple[float, float, float]:
    if len(set(groups)) < 2:
        return float(values.mean()), float("nan"), float("nan")
    return bootstrap_mean_interval(values, N_BOOT, seed, groups=groups)


def correct(heads: list[dict]) -> Correction:
    """Holm's correction over the analysed heads' switch-sensitivity tests on the held-out pairs (the family a
    reader scans for a sensitive head); each head gets its adjusted ``p_holm`` (NaN without test pairs)."""
    tested = [h for h in heads if h["switch"] is not None]
    found = correct_tests(
        "the analysed heads' switch sensitivity on the held-out pairs",
        [h["switch"].sensitivity.p_value for h in tested],
    )
    for h in heads:
        h["p_holm"] = float("nan")
    for h, adjusted in zip(tested, found.adjusted, strict=True):
        h["p_holm"] = adjusted
    return found
