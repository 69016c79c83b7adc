"""Faithfulness: how much of the model's behaviour a circuit reproduces, alone, on pairs it was not chosen on.

``faithfulness(C) = (m(C) - m(corrupt)) / (m(full) - m(corrupt))`` with ``m`` the metric's mean over pairs: 1
when running only the circuit (every other edge patched from the corrupted input) gives the clean model's
metric, 0 when it gives the corrupted one. Means are taken before the ratio, so a pair whose twins barely differ
cannot blow it up.

The curve is faithfulness against circuit size, and the MIB benchmark (Mueller et al. 2025) sums it up in two
areas over the fraction of the graph's edges kept (trapezoids; MIB evaluates 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50
and 100%): **CPR**, the area under the curve (higher is better), and **CMD**, the area between the curve and
1, ``|1 - faithfulness|`` (lower is better).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from interp.analysis.effect import normalised_effect
from interp.analysis.metric import Metric, check_metric, check_signature
from interp.circuits.circuit import Circuit
from interp.circuits.edge_attribution import EdgeScores
from interp.circuits.pairs import Pairs
from interp.circuits.patched_run import check_graph, corrupt_run, run_circuit, sources_read
from interp.circuits.select import greedy, top_n
from interp.circuits.shards import map_batches, ordered_sum
from interp.circuits.wiring import forward

MIB_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""The fractions of edges at which MIB's circuit track evaluates a method."""

SELECTIONS = {"top_n": top_n, "greedy": greedy}


@dataclass(frozen=True)
class Evaluation:
    """Metric means over the pairs: the full model, the corrupted run, and each circuit."""

    full: float
    corrupt: float
    values: tuple[float, ...]
    n_pairs: int

    @property
    def faithfulness(self) -> tuple[float, ...]:
        return tuple(faithfulness(v, self.full, self.corrupt) for v in self.values)


def faithfulness(value: float, full: float, corrupt: float) -> float:
    """``(value - corrupt) / (full - corrupt)``; NaN, with a warning, when the full and corrupted runs agree."""
    return normalised_effect(value - corrupt, full, corrupt, what="faithfulness")


def _batch_values(
    model, circuits: Sequence[Circuit], batch: Pairs, metric: Metric, read: torch.Tensor
) -> torch.Tensor:
    batch = batch.to(model.device)
    corrupt = corrupt_run(model, batch, circuits[0].graph, sources=read)
    sums = [float(check_metric(metric(corrupt.logits, batch), batch, "on the corrupted inputs").sum())]
    graph = circuits[0].graph
    # The full model is the plain forward: the full circuit computes the same with the inputs split (equal to
    # float tolerance, see interp.circuits.patched_run), at a higher cost.
    with torch.no_grad():
        full = forward(model, batch.clean, batch.attention_mask, batch.positions)
    sums.append(float(check_metric(metric(full, batch), batch, "on the clean inputs").sum()))
    for circuit in circuits:
        if circuit.n_edges in (0, graph.n_edges):  # the corrupted or the full run, measured above
            sums.append(sums[0] if circuit.n_edges == 0 else sums[1])
            continue
        logits = run_circuit(model, circuit, batch, corrupt)
        sums.append(float(check_metric(metric(logits, batch), batch, f"with {circuit!r}").sum()))
    return torch.tensor(sums, dtype=torch.float64)


def evaluate(
    model,
    circuits: Circuit | Sequence[Circuit],
    pairs: Pairs,
    metric: Metric,
    *,
    batch_size: int = 16,
    progress: bool = False,
) -> Evaluation:
    """Run each circuit on ``pairs`` (sharded over ``torchrun`` ranks) and average the metric.

    One corrupted run per batch serves every circuit; the full model and the corrupted inputs are measured on
    the same batches.
    """
    check_signature(metric)
    circuits = [circuits] if isinstance(circuits, Circuit) else list(circuits)
    if not circuits:
        raise ValueError("no circuits to evaluate")
    for circuit in circuits:
        check_graph(model, circuit.graph)
    read = sources_read(circuits)  # what the one corrupted run per batch records for them all
    parts = map_batches(
        pairs,
        batch_size,
        lambda b: _batch_values(model, circuits, b, metric, read),
        progress=progress,
        desc="circuits",
    )
    means = (ordered_sum(parts) / len(pairs)).tolist()
    return Evaluation(full=means[1], corrupt=means[0], values=tuple(means[2:]), n_pairs=len(pairs))


def curve_sizes(n_edges: int, fractions: Sequence[float] = MIB_FRACTIONS) -> list[int]:
    """Edge counts for fractions of a graph (at least 1 each), without repeats."""
    for f in fractions:
        if not 0 < f <= 1:
            raise ValueError(f"fraction {f} is outside (0, 1]")
    return sorted({max(1, int(f * n_edges)) for f in fractions})


def faithfulness_curve(
    model,
    scores: EdgeScores,
    pairs: Pairs,
    metric: Metric,
    *,
    sizes: Sequence[int] | None = None,
    selection: str = "top_n",
    absolute: bool = True,
    batch_size: int = 16,
    progress: bool = False,
) -> pd.DataFrame:
    """Faithfulness of circuits chosen from ``scores`` at several sizes, on ``pairs``.

    Args:
        sizes: edges requested per circuit (default: MIB's fractions of the graph).
        selection: ``"top_n"`` or ``"greedy"`` (see :mod:`interp.circuits.select`).
        absolute: rank edges by ``|score|`` (default) or by signed score.

    Returns:
        One row per size: ``requested``, ``edges`` (kept after pruning), ``fraction`` (of the graph's edges),
        ``metric`` and ``faithfulness``. ``frame.attrs`` holds ``full``, ``corrupt``, ``cpr`` and ``cmd``.
    """
    if selection not in SELECTIONS:
        raise ValueError(f"selection={selection!r}; expected one of {list(SELECTIONS)}")
    graph = scores.graph
    sizes = curve_sizes(graph.n_edges) if sizes is None else sorted({int(s) for s in sizes})
    circuits = [SELECTIONS[selection](scores, n, absolute=absolute) for n in sizes]
    result = evaluate(model, circuits, pairs, metric, batch_size=batch_size, progress=progress)
    frame = pd.DataFrame(
        {
            "requested": sizes,
            "edges": [c.n_edges for c in circuits],
            "fraction": [c.n_edges / graph.n_edges for c in circuits],
            "metric": list(result.values),
            "faithfulness": list(result.faithfulness),
        }
    )
    frame.attrs.update(
        full=result.full, corrupt=result.corrupt, **area_metrics(frame["fraction"], frame["faithfulness"])
    )
    return frame


def area_metrics(fractions: Sequence[float], values: Sequence[float]) -> dict[str, float]:
    """MIB's areas over a faithfulness curve: ``cpr`` (under it) and ``cmd`` (between it and 1), by trapezoids
    over the fraction of edges kept."""
    x, y = np.asarray(fractions, dtype=float), np.asarray(values, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"fractions and values must be equal-length lists, got {x.shape} and {y.shape}")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    widths = np.diff(x)
    cpr = float(np.sum(widths * (y[1:] + y[:-1]) / 2))
    gap = np.abs(1 - y)
    cmd = float(np.sum(widths * (gap[1:] + gap[:-1]) / 2))
    return {"cpr": cpr, "cmd": cmd}
