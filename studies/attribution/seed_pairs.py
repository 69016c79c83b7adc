"""The seed's question on every pair the model is sensitive to: which heads, and which (layer, feature) terms of
their queries, carry the twin difference, chosen on half of the schemas and tested on the other half.

Question. The seed pages say that "it" takes its meaning from "animal" because the query at the answer, with the
switch word, matches the referent's key. On one pair that is an anecdote. Across the WSC273 pairs (with the
seed's own) and the one-person agreement pairs, a mechanism of that kind predicts *what differs between twins*:
the heads that carry the candidates' edges into the answer carry more toward the expected referent in each twin
(their twin difference is positive), consistently across schemas; and, for WSC273, those heads' preference for
one candidate's key over the other's moves with the switch word, through query features that recur across
schemas.

Method. (1) Every usable pair's preference in both twins (:mod:`~studies.attribution.pairs`); its switch
sensitivity, and the ``pairs`` most sensitive pairs of each data set (positive sensitivity only). (2) Each
twin's graph, the candidates' edges into the answer, their head loadings (:mod:`~studies.attribution.
pair_trace`); per head its twin difference, with its magnitude (influence) and attention (activation) for the
controls. (3) The schemas split in half (seeded, twins together); on the selection half the ``heads`` heads with
the largest mean twin difference and their matched controls; on the test half the test
(:mod:`~studies.attribution.selection`). (4) WSC273: for the first ``qk_heads`` of them, in every pair, the
score difference between the two candidates' keys and its query-node parts by (layer, feature), nodes at the
shared prefix excluded; the ``terms`` terms with the largest mean twin difference chosen on the selection half
and tested on the test half the same way; the heads' score differences tested on the test half. (5) The reported
tests are one family, corrected by Holm's method, and each test's power is given as the effect it would have
detected (:mod:`~studies.attribution.pair_answer`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from interp.analysis.stats import group_interval, twin_difference_test
from studies.attribution import graphs, pairs, selection
from studies.attribution.pair_trace import trace_heads, trace_terms
from studies.data.load import split_by_schema


@dataclass(frozen=True)
class PairSettings:
    """How many pairs are traced and how many units are chosen and matched."""

    pairs: int = 24  # the most sensitive pairs traced per data set (12 to test: under 9, no test can pass)
    heads: int = 5  # heads chosen on the selection half
    qk_heads: int = 3  # of those, whose query terms are traced (WSC273)
    terms: int = 5  # query terms chosen on the selection half
    pool: int = 5  # units in each control
    seed: int = 0


def run(model: Any, tc: Any, items: dict[str, list], gs: graphs.GraphSettings, s: PairSettings,
        progress: bool = False) -> dict:  # fmt: skip
    """Each data set's pairs, heads and terms (``out["data"][name]``); the answer is
    :func:`~studies.attribution.pair_answer.summarise`'s."""
    out: dict[str, Any] = {"settings": asdict(s), "data": {}}
    for data in pairs.DATA:
        clock = time.perf_counter()
        out["data"][data] = run_data(model, tc, data, items[data], gs, s, progress)
        out["data"][data]["seconds"] = time.perf_counter() - clock
    return out


def run_data(model: Any, tc: Any, data: str, items: list, gs: graphs.GraphSettings, s: PairSettings,
             progress: bool) -> dict:  # fmt: skip
    """One data set: its sensitivity over every usable pair, then the held-out heads and terms."""
    built, left = pairs.build(model, data, items)
    every = pairs.measured(model, built)
    chosen = pairs.sensitive(every, s.pairs)
    out: dict[str, Any] = {"sensitivity": sensitivity(every), "left_out": left, "pairs": []}
    if not chosen:
        return out
    first = {p.schema_id for p in split_by_schema(chosen, 0.5, s.seed)[0]}
    rows = np.array([p.schema_id in first for p in chosen])  # the selection half
    drawn, heads = [], []
    for pair in tqdm(chosen, desc=f"{data} pairs", disable=not progress):
        g = tuple(graphs.draw(model, tc, p, gs, False) for p in pair.prompts)
        drawn.append(g)
        heads.append(trace_heads(model, tc, pair, g))
    values = np.stack([(h["carry"][0] - h["carry"][1]).ravel() for h in heads])  # [pair, layer * head]
    covariates = {
        "influence": np.stack([h["magnitude"].mean(0).ravel() for h in heads]),
        "activation": np.stack([h["attention"].mean(0).ravel() for h in heads]),
    }
    n_heads = model.cfg.n_heads
    names = [_head(u, n_heads) for u in range(values.shape[1])]
    chosen_heads, out["heads"] = selection.held_out(values, rows, s.heads, covariates, s.pool, names, s.seed)
    out["pairs"] = [_pair_record(p, h, bool(r)) for p, h, r in zip(chosen, heads, rows, strict=True)]
    if data == "winograd" and chosen_heads.units:
        asked = [divmod(u, n_heads) for u in chosen_heads.units[: s.qk_heads]]
        traced = [
            trace_terms(model, tc, p, g, asked)
            for p, g in tqdm(list(zip(chosen, drawn, strict=True)), desc="query terms", disable=not progress)
        ]
        out.update(query_terms(traced, rows, s))
        for record, t in zip(out["pairs"], traced, strict=True):
            record["score_difference"] = dict(zip(t["heads"], _score_differences(t), strict=True))
    return out


def sensitivity(every: list[pairs.TwinPair]) -> dict:
    """Over every usable pair: the switch sensitivity's sign-flip test and interval (each pair a schema), how
    many pairs are sensitive against chance 0.5, and the bias with its t-interval over pairs."""
    s = np.array([p.sensitivity for p in every])
    b = np.array([p.bias for p in every])
    return {
        "n": len(every),
        "test": twin_difference_test(s) if len(s) else None,
        "sensitive": int((s > 0).sum()),
        "chance": 0.5,
        "bias": group_interval(b) if len(b) else None,
        "values": [{"schema": p.schema_id, "preference": list(p.preference)} for p in every],
    }


def query_terms(traced: list[dict], rows: np.ndarray, s: PairSettings) -> dict:
    """The heads' score differences on the test half, and the query terms chosen on the selection half and
    tested on the test half; with the twin difference split by kind of node, over every pair."""
    score = np.array([_score_differences(t) for t in traced])  # [pair, qk head]
    every_head = selection.Selected(tuple(range(score.shape[1])), (), {})
    keys = sorted({k for t, r in zip(traced, rows, strict=True) if r for k in _part_keys(t)})
    values = np.array([[_twin_part(t, k) for k in keys] for t in traced])  # [pair, key]
    covariates = {
        name: np.array([[_covariate(t, name, k) for k in keys] for t in traced])
        for name in selection.COVARIATES
    }
    out: dict[str, Any] = {
        "score": {
            "heads": traced[0]["heads"],
            "test": selection.test(score, ~rows, every_head, s.seed),
            "selection_mean": score[rows].mean(0).tolist(),
        },
        "kinds": _kinds(traced),
    }
    if keys:
        names = [f"{traced[0]['heads'][k[0]]}: L{k[1]}.F{k[2]}" for k in keys]
        strata = [k[0] for k in keys]
        _, out["terms"] = selection.held_out(values, rows, s.terms, covariates, s.pool, names, s.seed, strata)
    return out


def _head(unit: int, n_heads: int) -> str:
    layer, head = divmod(unit, n_heads)
    return f"L{layer}H{head}"


def _pair_record(pair: pairs.TwinPair, heads: dict, selection_half: bool) -> dict:
    return {
        "schema": pair.schema_id,
        "prompts": [p.name for p in pair.prompts],
        "half": "selection" if selection_half else "test",
        "preference": list(pair.preference),
        "sensitivity": pair.sensitivity,
        "bias": pair.bias,
        "shared": pair.shared,
        "nodes": heads["nodes"],
        "edge_difference": sum(heads["edges"][0]) - sum(heads["edges"][1]),
        "direct_difference": sum(heads["direct"][0]) - sum(heads["direct"][1]),
    }


def _score_differences(t: dict) -> list[float]:
    """Per traced head: its (first - second candidate) score difference in the twin expecting the first minus
    in its twin."""
    first, second = t["twins"]
    return [a["difference"] - b["difference"] for a, b in zip(first["heads"], second["heads"], strict=True)]


def _part_keys(t: dict) -> set[tuple[int, int, int]]:
    return {(i, *k) for twin in t["twins"] for i, h in enumerate(twin["heads"]) for k in h["parts"]}


def _twin_part(t: dict, key: tuple[int, int, int]) -> float:
    i, layer, feature = key
    first, second = (twin["heads"][i]["parts"].get((layer, feature), 0.0) for twin in t["twins"])
    return first - second


def _covariate(t: dict, name: str, key: tuple[int, int, int]) -> float:
    return float(np.mean([twin[name].get(key[1:], 0.0) for twin in t["twins"]]))


def _kinds(traced: list[dict]) -> dict:
    """Per traced head, the twin difference of its score difference split by kind of query node (features
    after the shared prefix, features in it, errors, token embeddings, bias), as means over pairs."""
    out = {}
    for i, head in enumerate(traced[0]["heads"]):
        per_pair = []
        for t in traced:
            a, b = (twin["heads"][i] for twin in t["twins"])
            split = {k: a["rest"][k] - b["rest"][k] for k in a["rest"]}
            split["features"] = sum(a["parts"].values()) - sum(b["parts"].values())
            per_pair.append(split)
        out[head] = {k: float(np.mean([p[k] for p in per_pair])) for k in per_pair[0]}
    return out
