"""Exact edge patching: the metric's fall when one edge alone is patched from the corrupted input.

For an edge ``u -> v`` the clean run is repeated with ``v``'s input replaced by ``clean_input_v - out_u(clean) +
out_u(corrupt)``, everything else left to compute itself, and the score is ``m(clean) - m(patched)``, averaged
over pairs. Nothing upstream of ``v`` changes, so the clean and corrupted outputs of ``u`` are read once per
batch; many edges share one forward pass, each in its own copy of the batch. This is what EAP and EAP-IG
approximate (one pass per edge instead of a few per batch), so it serves to check them on a sample of edges.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch

from interp.analysis.conditions import Conditions
from interp.analysis.metric import Metric, check_metric, check_signature
from interp.circuits.circuit import Circuit
from interp.circuits.edge_attribution import EdgeScores
from interp.circuits.pairs import Pairs
from interp.circuits.run import check_graph, new_store, record_sources
from interp.circuits.shards import map_batches, ordered_sum
from interp.circuits.wiring import forward, input_hooks, split

ROWS_PER_PASS = 64
"""Rows (edges x pairs) per patched forward pass when ``edges_per_pass`` is not given."""


def _patch_edges(spec, edits: list[tuple[int, int, int]], diff: torch.Tensor):
    """Hook on the copies subtracting ``diff[source]`` from input ``column`` in copy ``k``, for each ``(k,
    column, source)`` of ``edits``."""

    def patch(copies: torch.Tensor, hook) -> torch.Tensor:
        x = copies.clone()  # [copy, batch, pos, (inputs,) d_model]
        for k, column, source in edits:
            target = x[k, :, :, column] if spec.heads else x[k]
            target.copy_((target.float() - diff[source]).to(x.dtype))
        return x

    return patch


def _batch_exact(model, graph, batch: Pairs, metric: Metric, edges: list[tuple[int, int]], per_pass: int):
    batch = batch.to(model.device)
    clean, corrupt = new_store(graph, batch, model), new_store(graph, batch, model)
    with split(model), torch.no_grad():
        args = (batch.attention_mask, batch.positions)
        clean_logits = forward(model, batch.clean, *args, fwd_hooks=record_sources(model, graph, clean))
        forward(model, batch.corrupt, *args, fwd_hooks=record_sources(model, graph, corrupt))
        clean_metric = check_metric(metric(clean_logits, batch), batch, "on the clean inputs")
        diff = clean - corrupt  # [sources, batch, pos, d_model]
        specs = input_hooks(graph)
        owner = {j: spec for spec in specs for j in range(spec.cols.start, spec.cols.stop)}
        falls = []
        for start in range(0, len(edges), per_pass):
            chunk = edges[start : start + per_pass]
            stack = Conditions(copies=len(chunk), batch=len(batch))
            edits: dict[str, list] = defaultdict(list)
            for k, (i, j) in enumerate(chunk):
                spec = owner[j]
                edits[spec.name].append((k, j - spec.cols.start, i))
            hooks = [
                (spec.name, stack.hook(_patch_edges(spec, edits[spec.name], diff)))
                for spec in specs
                if spec.name in edits
            ]
            inputs = (stack.repeat(x) for x in (batch.clean, batch.attention_mask, batch.positions))
            logits = forward(model, *inputs, fwd_hooks=hooks)
            for k, part in enumerate(stack.split(logits)):
                value = check_metric(metric(part, batch), batch, f"with the edge {chunk[k]} patched")
                falls.append(float((clean_metric - value).sum()))
    return torch.tensor(falls, dtype=torch.float64)


def exact_edge_scores(
    model,
    pairs: Pairs,
    metric: Metric,
    edges: Sequence[tuple[str, str]] | Circuit,
    *,
    batch_size: int = 16,
    edges_per_pass: int | None = None,
    progress: bool = False,
) -> EdgeScores:
    """``m(clean) - m(clean with the edge alone patched from the corrupted input)`` for each edge, averaged
    over pairs.

    Args:
        model: a :class:`~interp.HookedTransformer`.
        pairs: the clean and corrupted inputs.
        metric: ``metric(logits, batch) -> [batch]``.
        edges: the ``(source, input)`` edges to measure, or a circuit's edges.
        batch_size: pairs per batch.
        edges_per_pass: edges patched in one forward pass (each in its own copy of the batch); default: as
            many as fit in 64 rows.
        progress: show a progress bar (rank 0).

    Returns:
        :class:`EdgeScores` with ``method="exact"``: the measured edges hold their score, every other edge 0;
        ``EdgeScores.values(edges)`` reads them back in order.
    """
    check_signature(metric)
    graph = check_graph(model, edges.graph if isinstance(edges, Circuit) else None)
    names = edges.edges if isinstance(edges, Circuit) else [tuple(e) for e in edges]
    index = [graph.edge_index(e) for e in names]  # raises on an edge the graph lacks
    if len(set(index)) != len(index):
        raise ValueError("the edge list names an edge more than once")
    if not index:
        return EdgeScores(
            graph=graph, scores=torch.zeros(graph.allowed.shape), method="exact", n_pairs=len(pairs)
        )
    per_pass = edges_per_pass or max(1, ROWS_PER_PASS // min(batch_size, len(pairs)))
    if isinstance(per_pass, bool) or not isinstance(per_pass, int) or per_pass < 1:
        raise ValueError(f"edges_per_pass={edges_per_pass!r}; it must be a positive integer")
    pairs.batches(batch_size)
    parts = map_batches(
        pairs,
        batch_size,
        lambda b: _batch_exact(model, graph, b, metric, index, per_pass),
        progress=progress,
        desc="exact",
    )
    means = ordered_sum(parts) / len(pairs)
    scores = torch.zeros(len(graph.sources), len(graph.inputs))
    for (i, j), value in zip(index, means.tolist(), strict=True):
        scores[i, j] = value
    return EdgeScores(graph=graph, scores=scores, method="exact", n_pairs=len(pairs))
