"""The study's measurements of the methods: scores, faithfulness curves, the smallest faithful circuit, and
checks against exact patching (what the chosen circuit is made of: :mod:`studies.circuits.anatomy`).

Every function here is called on every rank: the library's scoring, evaluation and exact patching share their
batches out among ``torchrun`` ranks and hand every rank the merged result, so every rank's state is the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from interp.circuits import (
    MIB_FRACTIONS,
    Circuit,
    EdgeScores,
    Graph,
    area_metrics,
    edge_attribution,
    evaluate,
    exact_edge_scores,
    logit_difference,
    merge_scores,
    top_n,
)
from interp.circuits.faithfulness import curve_sizes
from studies.circuits.data import StudyPairs

METHODS = ("eap", "eap-ig")


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
