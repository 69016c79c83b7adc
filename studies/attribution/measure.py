"""Everything measured on one prompt's graph, and the summaries over prompts with their intervals.

Per prompt: the graph's scores, its features ranked by influence on the target, the top features' ablation
(frozen against the graph's prediction, and free) beside matched random features, and the head loadings of the
edges from the top features at the words that matter (the name; the animal and the street) to the target.
Intervals are 95%: percentile bootstrap over prompts (2,000 resamples, seeded; the twins of a schema resampled
together), also for fractions and for head shares. "Top beats every random set" compares effects signed toward
the expected answer (the top set must lower the answer's preference more than each random set does), against
the 1 / (draws + 1) a top set no different from its random sets would reach. A head's share of the loadings is
read against the shares under a shuffled assignment: each prompt's loadings permuted over the heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from interp.analysis.stats import bootstrap_mean_interval
from interp.circuits.features import head_loadings
from studies.attribution import graphs, interventions
from studies.attribution.prompts import Prompt
from studies.data.switch import SwitchSummary, switch_pair
from studies.data.switch import summarise as summarise_switch

WORDS = ("name", "animal", "street")  # the roles whose features' paths are split into heads


@dataclass(frozen=True)
class ProbeSettings:
    """How each graph is tested."""

    top: int
    random_draws: int
    pool: int
    loading_sources: int
    seed: int


def measure_prompt(
    model: Any, tc: Any, prompt: Prompt, gs: graphs.GraphSettings, ps: ProbeSettings, progress
):
    """Draw ``prompt``'s graph and test it; a dict of plain values, one table of features, and the graph."""
    graph = graphs.draw(model, tc, prompt, gs, progress)
    features = graphs.feature_table(graph, prompt)
    out = graphs.summary(graph, prompt, features)
    logit_row = graph.n_features + graph.n_errors + graph.n_pos
    top = features.head(ps.top)
    triples = [(int(r.layer), int(r.position), int(r.feature)) for r in top.itertuples()]
    predicted = -graphs.edge_sum(graph, top["node"].tolist(), logit_row)
    effect = interventions.ablation(model, tc, prompt, triples)
    active, values = interventions.active_features(model, tc, prompt.tokens)
    random_sets = interventions.matched_random(triples, active, values, ps.random_draws, ps.pool, ps.seed)
    random = [interventions.ablation(model, tc, prompt, s) for s in random_sets]
    out.update(
        sign=prompt.sign,
        clean=effect["free_clean"],
        predicted=predicted,
        frozen=effect["frozen"],
        free=effect["free"],
        random_frozen=[r["frozen"] for r in random],
        random_free=[r["free"] for r in random],
        top=[f"L{layer}.F{feature}@{position}" for layer, position, feature in triples],
        n_active=len(active),
    )
    out["loadings"] = _loadings(model, tc, graph, features, ps.loading_sources)
    return out, features, graph


def _loadings(model: Any, tc: Any, graph, features, per_role: int) -> dict:
    """Head loadings of the difference target (``logit.1 - logit.2``) from the ``per_role`` most influential
    features at each of the words."""
    picked = graphs.top_by_role(features[features["role"].isin(WORDS)], per_role)
    heads = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    direct, edges, names = 0.0, 0.0, []
    for row in picked.itertuples():
        node = str(graph.nodes[int(row.node)])
        a = head_loadings(model, tc, graph, "logit.1", node)
        b = head_loadings(model, tc, graph, "logit.2", node)
        heads += a.heads - b.heads
        direct += a.direct - b.direct
        edges += a.edge - b.edge
        names.append(node)
    return {"sources": names, "heads": heads.tolist(), "direct": direct, "edge": edges}


def head_shares(loadings: list[dict]) -> np.ndarray:
    """``[n_layers, n_heads]``: each head's share of the summed absolute loadings (direct paths included)."""
    heads, totals = _per_prompt(loadings)
    total = totals.sum()
    return heads.sum(0) / total if total > 0 else heads.sum(0)


def _per_prompt(loadings: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """``[prompt, n_layers, n_heads]`` absolute loadings, and ``[prompt]`` their sums with the direct paths."""
    heads = np.stack([np.abs(np.array(x["heads"], dtype=float)) for x in loadings])
    totals = heads.sum((1, 2)) + np.array([abs(x["direct"]) for x in loadings])
    return heads, totals


def share_intervals(loadings: list[dict], heads: list[tuple[int, int]], groups: list, seed: int) -> dict:
    """For each of ``heads``: its pooled share with a 95% interval over schemas, and the shuffled baseline.

    The baseline permutes each prompt's head loadings over the heads (1,000 times, seeded) and pools them as the
    share is pooled: ``shuffled_mean`` is the share any one head carries on average under that assignment and
    ``shuffled_max_95`` the 95th percentile of the largest share of any head, the level a head must pass to
    stand out by more than the spread of loadings over heads gives by chance."""
    per, totals = _per_prompt(loadings)
    n_prompts, n_layers, n_heads = per.shape
    rng = np.random.default_rng(seed)
    flat = per.reshape(n_prompts, -1)  # [prompt, layer * head]
    maxima = []
    for _ in range(1000):
        shuffled = np.stack([row[rng.permutation(row.size)] for row in flat])  # [prompt, layer * head]
        maxima.append(float(shuffled.sum(0).max() / totals.sum()))
    out = {}
    for layer, head in heads:
        share = per[:, layer, head]
        ok = totals > 0
        if len(set(np.asarray(groups)[ok].tolist())) > 1:
            mean, low, high = bootstrap_mean_interval(
                share[ok] / totals[ok], 2000, seed, groups=np.asarray(groups)[ok], weights=totals[ok]
            )
        else:
            mean, low, high = float(share.sum() / totals.sum()), float("nan"), float("nan")
        out[f"L{layer}H{head}"] = {
            "share": mean,
            "ci": [low, high],
            "shuffled_mean": float(flat.sum() / totals.sum() / flat.shape[1]),
            "shuffled_max_95": float(np.percentile(maxima, 95)),
        }
    return out


def top_beats_random(rows: list[dict], seed: int) -> dict:
    """In how many prompts the top set's free effect, signed toward the answer, is below that of every random
    set: an indicator per prompt with its mean, a 95% interval over schemas, and the chance level
    ``1 / (draws + 1)`` (the top set ranked first among itself and its draws by luck alone)."""
    wins = [
        float(r["sign"] * r["free"] < min(r["sign"] * x for x in r["random_free"]))
        for r in rows
        if r["random_free"]
    ]
    draws = [len(r["random_free"]) for r in rows if r["random_free"]]
    kept = [r["schema"] for r in rows if r["random_free"]]
    out = interval(wins, seed, kept) if wins else {"mean": float("nan"), "ci": [float("nan")] * 2}
    out.update(
        count=int(sum(wins)),
        n=len(wins),
        chance=float(np.mean([1 / (d + 1) for d in draws])) if draws else float("nan"),
    )
    return out


def interval(values: list[float], seed: int, groups: list | None = None) -> dict:
    """The mean of ``values`` with its 95% interval over ``groups`` (:func:`bootstrap_mean_interval`: the
    percentile bootstrap from 10 groups, the t-interval over groups below, where the bootstrap covers too little;
    NaN bounds for fewer than two values or groups: one schema's twins as one group give no interval)."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2 or (groups is not None and len(set(groups)) < 2):
        return {"mean": float(v.mean()) if len(v) else float("nan"), "ci": [float("nan"), float("nan")]}
    mean, lo, hi = bootstrap_mean_interval(v, 2000, seed, groups=groups)
    return {"mean": float(mean), "ci": [float(lo), float(hi)]}


def summarise(rows: list[dict], seed: int) -> dict:
    """Over prompts: scores, the frozen check, the free effects against random, with intervals.

    Effects are signed toward each prompt's expected answer (``sign * change``), so a feature set that
    carries the answer gives a negative effect when ablated.
    """
    groups = [r["schema"] for r in rows]  # the twins of a schema are resampled together
    signed = lambda key: [r["sign"] * r[key] for r in rows]  # noqa: E731
    random_free = [r["sign"] * float(np.mean(r["random_free"])) for r in rows]
    errors = [abs(r["frozen"] - r["predicted"]) / max(1.0, abs(r["predicted"])) for r in rows]
    return {
        "n_prompts": len(rows),
        "replacement_score": interval([r["replacement_score"] for r in rows], seed, groups),
        "completeness_score": interval([r["completeness_score"] for r in rows], seed, groups),
        "clean": interval(signed("clean"), seed, groups),
        "predicted": interval(signed("predicted"), seed, groups),
        "frozen": interval(signed("frozen"), seed, groups),
        "free": interval(signed("free"), seed, groups),
        "random_free": interval(random_free, seed, groups),
        "random_frozen": interval(
            [r["sign"] * float(np.mean(r["random_frozen"])) for r in rows], seed, groups
        ),
        "frozen_max_relative_error": float(max(errors)) if errors else float("nan"),
        "top_beats_every_random": top_beats_random(rows, seed),
        "role_shares": role_shares(rows, seed),
    }


def role_shares(rows: list[dict], seed: int) -> dict:
    """Each word's share of the graphs' feature influence (``"name"``, ``"animal"``...): the mean over prompts
    with its 95% interval over schemas (a word with no feature in a prompt's graph counts 0 there)."""
    groups = [r["schema"] for r in rows]
    roles = sorted({role for r in rows for role in r["role_shares"]})
    return {role: interval([r["role_shares"].get(role, 0.0) for r in rows], seed, groups) for role in roles}


def switch(rows: list[dict], labels: tuple[str, str], seed: int) -> SwitchSummary | None:
    """The model's switch sensitivity and bias over the twin pairs among ``rows`` (:mod:`studies.data.switch`):
    per schema with two prompts, the target (``a - b``, one direction in both twins) of the model itself
    (``clean``: the replacement model with its error terms) in each twin, twin a expecting ``a`` when its
    ``sign`` is +1. ``None`` when no schema has two prompts."""
    by_schema: dict[str, list[dict]] = {}
    for r in rows:
        by_schema.setdefault(r["schema"], []).append(r)
    pairs = [v for v in by_schema.values() if len(v) == 2]
    if not pairs:
        return None
    scored = [switch_pair(a["clean"], b["clean"], 0 if a["sign"] > 0 else 1) for a, b in pairs]
    return summarise_switch(scored, labels=labels, unit="logits", seed=seed)
