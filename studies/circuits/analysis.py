"""The study's measurements: scores, faithfulness curves, the smallest faithful circuit, checks against exact
patching, the circuit's heads, its behaviour on one- and two-person prompts, and where its MLPs act.

Every function here is called on every rank: the library's scoring and evaluation share their batches out
among ``torchrun`` ranks and hand every rank the merged result, and the few small extra passes (attention
patterns, per-pair metrics) are cheap enough to repeat on each rank, which keeps every rank's state the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from interp.analysis import attribution_patch
from interp.circuits import (
    MIB_FRACTIONS,
    Circuit,
    EdgeScores,
    Graph,
    area_metrics,
    corrupt_run,
    edge_attribution,
    evaluate,
    exact_edge_scores,
    faithfulness,
    logit_difference,
    merge_scores,
    run_circuit,
    top_n,
)
from interp.circuits.faithfulness import curve_sizes
from studies.circuits.data import StudyPairs

METHODS = ("eap", "eap-ig")
COREFERENCE_HEADS = ((25, 2), (26, 2))
"""Heads whose outputs (``hook_z``), patched between agreement twins, recovered most of the pronoun logit
difference in the coreference study on SmolLM2-135M (``interp study coreference``)."""


@dataclass
class Scored:
    """Scores per method over all scoring pairs, and over the subset that exact patching checks."""

    all: dict[str, EdgeScores]
    exact_subset: dict[str, EdgeScores]


def score(
    model, scoring: StudyPairs, exact_rows: list[int], steps: int, batch_size: int, progress: bool
) -> Scored:
    """EAP and EAP-IG over the scoring pairs, computed as two parts (the exact-patching subset and the rest)
    and merged, so the subset's own scores come at no extra cost."""
    rest = [i for i in range(len(scoring)) if i not in set(exact_rows)]
    total, subset = {}, {}
    for method in METHODS:
        parts = []
        for rows in (exact_rows, rest):
            if rows:
                pairs = scoring.subset(rows).pairs
                parts.append(
                    edge_attribution(
                        model,
                        pairs,
                        logit_difference,
                        method=method,
                        steps=steps,
                        batch_size=batch_size,
                        progress=progress,
                    )
                )
        subset[method] = parts[0]
        total[method] = merge_scores(parts)
    return Scored(total, subset)


def sizes_for(graph: Graph, small: tuple[int, ...]) -> list[int]:
    """The curve's circuit sizes: the small ones asked for (those below the graph's size) and MIB's fractions
    of the graph."""
    return sorted({*(n for n in small if n < graph.n_edges), *curve_sizes(graph.n_edges, MIB_FRACTIONS)})


def curve(
    model,
    scores: EdgeScores,
    pairs: StudyPairs,
    sizes: list[int],
    *,
    absolute: bool,
    split: str,
    batch_size: int,
    progress: bool,
) -> pd.DataFrame:
    """Faithfulness of the top-``n`` circuits (by ``|score|`` or by signed score) on ``pairs``, one row per size."""
    circuits = [top_n(scores, n, absolute=absolute) for n in sizes]
    result = evaluate(
        model, circuits, pairs.pairs, logit_difference, batch_size=batch_size, progress=progress
    )
    return pd.DataFrame(
        {
            "method": scores.method,
            "ranking": "abs" if absolute else "signed",
            "split": split,
            "requested": sizes,
            "edges": [c.n_edges for c in circuits],
            "fraction": [c.n_edges / scores.graph.n_edges for c in circuits],
            "metric": list(result.values),
            "faithfulness": list(result.faithfulness),
            "full": result.full,
            "corrupt": result.corrupt,
        }
    )


def areas(curves: pd.DataFrame, graph: Graph) -> pd.DataFrame:
    """MIB's CPR and CMD per method, ranking and split, over the MIB fractions (sizes in between left out)."""
    mib = set(curve_sizes(graph.n_edges, MIB_FRACTIONS))
    rows = []
    for (method, ranking, split), frame in curves.groupby(["method", "ranking", "split"], sort=True):
        points = frame[frame["requested"].isin(mib)]
        if len(points) == len(mib):
            rows.append(
                {
                    "method": method,
                    "ranking": ranking,
                    "split": split,
                    **area_metrics(points["fraction"], points["faithfulness"]),
                }
            )
    return pd.DataFrame(rows)


@dataclass
class Smallest:
    """The smallest top-``n`` circuit found to reach the threshold on the scoring pairs."""

    circuit: Circuit
    requested: int
    faithfulness_train: float
    faithfulness_test: float
    train_points: pd.DataFrame


def smallest(
    model,
    scores: EdgeScores,
    train: StudyPairs,
    test: StudyPairs,
    sizes: list[int],
    threshold: float,
    batch_size: int,
    progress: bool,
) -> Smallest:
    """Walk up the sizes on the scoring pairs until faithfulness reaches ``threshold``, refine between the last
    size below it and the first above on a log grid of four, and test the smallest such circuit on held-out
    pairs. Choosing the size on the scoring pairs keeps the held-out number honest."""
    points = []
    lo, hi = 0, None
    for start in range(0, len(sizes), 4):
        chunk = sizes[start : start + 4]
        frame = curve(
            model,
            scores,
            train,
            chunk,
            absolute=True,
            split="train",
            batch_size=batch_size,
            progress=progress,
        )
        points.append(frame)
        above = frame[frame["faithfulness"] >= threshold]
        if len(above):
            hi = int(above["requested"].iloc[0])
            below = frame[(frame["requested"] < hi)]
            lo = int(below["requested"].iloc[-1]) if len(below) else (sizes[start - 1] if start else 0)
            break
    if hi is None:  # the full graph reaches 1 by construction, so only a non-monotone curve gets here
        hi = scores.graph.n_edges
    grid = sorted(
        {int(round(math.exp(x))) for x in np.linspace(math.log(max(lo, 1)), math.log(hi), 6)[1:-1]} - {lo, hi}
    )
    if grid:
        points.append(
            curve(
                model,
                scores,
                train,
                grid,
                absolute=True,
                split="train",
                batch_size=batch_size,
                progress=progress,
            )
        )
    train_points = (
        pd.concat(points, ignore_index=True)
        .drop_duplicates("requested")
        .sort_values("requested", ignore_index=True)
    )
    reached = train_points[train_points["faithfulness"] >= threshold]
    best = reached.iloc[0] if len(reached) else train_points.iloc[-1]
    circuit = top_n(scores, int(best["requested"]))
    test_result = evaluate(
        model, circuit, test.pairs, logit_difference, batch_size=batch_size, progress=progress
    )
    return Smallest(
        circuit,
        int(best["requested"]),
        float(best["faithfulness"]),
        test_result.faithfulness[0],
        train_points,
    )


def exact_check(
    model,
    pairs: StudyPairs,
    subset: dict[str, EdgeScores],
    n_random: int,
    n_top: int,
    seed: int,
    batch_size: int,
    progress: bool,
):
    """Exact patching of a uniform random sample of edges and of the strongest ones by either method, on the
    exact-patching pairs; returns the table and the correlations per method and sample."""
    graph = next(iter(subset.values())).graph
    edges = graph.edges()
    g = torch.Generator().manual_seed(seed)
    random_edges = [edges[int(i)] for i in torch.randperm(len(edges), generator=g)[:n_random]]
    top_edges: list[tuple[str, str]] = []
    for method in METHODS:  # each method's strongest edges not already checked
        frame = subset[method].frame(top=n_top + n_random + len(top_edges))
        added = 0
        for edge in zip(frame["source"], frame["input"], strict=True):
            if added == n_top:
                break
            if edge not in random_edges and edge not in top_edges:
                top_edges.append(edge)
                added += 1
    checked = random_edges + top_edges
    exact = exact_edge_scores(
        model, pairs.pairs, logit_difference, checked, batch_size=batch_size, progress=progress
    )
    table = pd.DataFrame(
        {
            "source": [e[0] for e in checked],
            "input": [e[1] for e in checked],
            "sample": ["random"] * len(random_edges) + ["top"] * len(top_edges),
            "exact": exact.values(checked).tolist(),
            **{m: subset[m].values(checked).tolist() for m in METHODS},
        }
    )
    rows = []
    for method in METHODS:
        for sample in ("random", "top", "all"):
            part = table if sample == "all" else table[table["sample"] == sample]
            rows.append({"method": method, "sample": sample, **correlation(part[method], part["exact"])})
    return table, pd.DataFrame(rows)


def correlation(x: pd.Series, y: pd.Series) -> dict:
    """Pearson and Spearman correlation (NaN when either side is constant) and the number of edges."""
    x, y = x.astype(float), y.astype(float)
    if len(x) < 3 or x.std() == 0 or y.std() == 0:
        return {"pearson": float("nan"), "spearman": float("nan"), "edges_checked": len(x)}
    return {
        "pearson": float(np.corrcoef(x, y)[0, 1]),
        "spearman": float(x.rank().corr(y.rank())),
        "edges_checked": len(x),
    }


@torch.no_grad()
def per_pair_metrics(model, circuit: Circuit, pairs: StudyPairs, batch_size: int) -> pd.DataFrame:
    """Per pair: the metric of the full model, the corrupted input and the circuit."""
    rows = []
    for span in pairs.pairs.batches(batch_size):
        batch = pairs.pairs[span.start : span.stop].to(model.device)
        corrupt = corrupt_run(model, batch)
        values = {
            "corrupt": logit_difference(corrupt.logits, batch),
            "full": logit_difference(run_circuit(model, Circuit.full(circuit.graph), batch, corrupt), batch),
            "circuit": logit_difference(run_circuit(model, circuit, batch, corrupt), batch),
        }
        for k, i in enumerate(span):
            rows.append(
                {
                    "pair": "/".join(pairs.ids[i]),
                    "two_people": pairs.two_people[i],
                    **{n: float(v[k]) for n, v in values.items()},
                }
            )
    return pd.DataFrame(rows)


def by_people(per_pair: pd.DataFrame) -> pd.DataFrame:
    """Faithfulness and accuracy (metric > 0: the clean answer preferred) on one- and two-person prompts."""
    rows = []
    for label, part in (
        ("one person", per_pair[~per_pair["two_people"]]),
        ("two people", per_pair[per_pair["two_people"]]),
        ("all", per_pair),
    ):
        if not len(part):
            continue
        full, corrupt, value = part["full"].mean(), part["corrupt"].mean(), part["circuit"].mean()
        rows.append(
            {
                "prompts": label,
                "pairs": len(part),
                "full": full,
                "corrupt": corrupt,
                "circuit": value,
                "faithfulness": faithfulness(value, full, corrupt),
                "accuracy_full": float((part["full"] > 0).mean()),
                "accuracy_circuit": float((part["circuit"] > 0).mean()),
            }
        )
    return pd.DataFrame(rows)


@torch.no_grad()
def name_attention(model, pairs: StudyPairs, layers: list[int], batch_size: int) -> np.ndarray:
    """``[n_layers, n_heads]`` mean attention from the read position to the antecedent's tokens (clean inputs;
    NaN for layers not asked for)."""
    cfg = model.cfg
    out = np.full((cfg.n_layers, cfg.n_heads), np.nan)
    if not layers:
        return out
    sums = np.zeros((len(layers), cfg.n_heads))
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in layers]
    for span in pairs.pairs.batches(batch_size):
        batch = pairs.pairs[span.start : span.stop].to(model.device)
        _, cache = model.run_with_cache(batch.clean, batch.attention_mask, names_filter=names)
        read = batch.read_positions()
        for k, i in enumerate(span):
            for li, name in enumerate(names):
                pattern = cache[name][k, :, int(read[k])]  # [head, key]
                sums[li] += pattern[:, pairs.names[i]].sum(-1).float().cpu().numpy()
    out[layers] = sums / len(pairs)
    return out


def heads_table(
    circuit: Circuit, scores: EdgeScores, attention: np.ndarray, reference=COREFERENCE_HEADS
) -> pd.DataFrame:
    """The circuit's heads and the reference heads: edges in and out, summed ``|score|`` of those edges, and
    attention from the read position to the antecedent."""
    graph = circuit.graph
    mask = circuit.mask
    weight = scores.scores.abs() * mask
    rows = []
    for layer, head in sorted(set(circuit.heads) | set(reference)):
        name = f"L{layer}.H{head}"
        i = graph.source_index(name)
        cols = [
            graph.input_index(f"{name}.q"),
            graph.input_index(f"L{layer}.KV{head // graph.group_size}.k"),
            graph.input_index(f"L{layer}.KV{head // graph.group_size}.v"),
        ]
        rows.append(
            {
                "head": name,
                "layer": layer,
                "in_circuit": (layer, head) in circuit.heads,
                "reference": (layer, head) in reference,
                "edges_out": int(mask[i].sum()),
                "edges_in": int(mask[:, cols].sum()),
                "score_out": float(weight[i].sum()),
                "attention_to_name": float(attention[layer, head]),
            }
        )
    return pd.DataFrame(rows)


def mlp_positions(model, pairs: StudyPairs, layers: list[int]) -> pd.DataFrame:
    """Where each MLP's output carries the metric: attribution patching of ``hook_mlp_out`` by position, pair by
    pair, summed by the position's role as shares of the layer's total ``|attribution|``. Roles: the
    antecedent's tokens (``name``), the token after it (``next``: the verb in most prompts), the others up to
    the read position (``between``) and the read position (``final``). Positions before the antecedent are the
    same in both twins and carry nothing."""
    roles = ("name", "next", "between", "final")
    if not layers:
        return pd.DataFrame(columns=["mlp", *roles])
    totals = {layer: dict.fromkeys(roles, 0.0) for layer in layers}
    hooks = [f"blocks.{layer}.hook_mlp_out" for layer in layers]
    for i in range(len(pairs)):
        one = pairs.pairs[i : i + 1].to(model.device)
        read, last = int(one.read_positions()[0]), pairs.names[i][-1]
        frame = attribution_patch(
            model,
            one.clean,
            one.corrupt,
            lambda logits, one=one: logit_difference(logits, one)[0],
            hooks,
            by="position",
            attention_mask=one.attention_mask,
        )
        for row in frame.itertuples():
            p = int(row.position)
            if p in pairs.names[i]:
                role = "name"
            elif p == read:
                role = "final"
            elif p == last + 1:
                role = "next"
            elif last < p < read:
                role = "between"
            else:
                continue
            totals[int(row.layer)][role] += abs(float(row.delta))
    rows = []
    for layer, parts in totals.items():
        whole = sum(parts.values()) or float("nan")
        rows.append({"mlp": f"L{layer}.MLP", **{k: v / whole for k, v in parts.items()}})
    return pd.DataFrame(rows)
