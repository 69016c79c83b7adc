"""What ``interp attribute`` adds to a graph so it can be read: explained attention edges, a subgraph read from a
file and proposed supernodes, merged into one subgraph (the file's supernodes first; a proposed group that
shares a node with one of them is left out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interp.circuits.features.attention import attention_edges, explain_edges
from interp.circuits.features.neuronpedia import pruned_parts
from interp.circuits.features.subgraph import read_subgraph


def readable(
    graph: Any,
    model: Any,
    transcoders: Any,
    *,
    explain: int = 0,
    supernodes: str | None = None,
    subgraph: str | Path | None = None,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
) -> tuple[Any, list, dict[str, Any] | None]:
    """``(graph with its subgraph, explained edges, supernode report)``.

    Args:
        explain: explain the ``explain`` strongest edges between positions of the pruned graph.
        supernodes: ``"auto"``: propose supernodes among the feature nodes the pruned graph keeps.
        subgraph: a JSON file of pinned nodes and supernodes (:func:`~.subgraph.subgraph_file`).
    """
    if supernodes not in (None, "auto"):
        raise ValueError(f"supernodes must be 'auto' or None, got {supernodes!r}")
    vocab = getattr(getattr(model, "cfg", None), "d_vocab", None)
    chosen = read_subgraph(subgraph, graph, vocab) if subgraph is not None else None
    explained = []
    if explain:
        edges = attention_edges(graph, explain, node_threshold, edge_threshold)
        explained = explain_edges(model, transcoders, graph, edges)
    report = None
    pinned = list(chosen.pinned) if chosen is not None else []
    groups = [list(g) for g in chosen.supernodes] if chosen is not None else []
    if supernodes == "auto":
        records, _ = pruned_parts(graph, node_threshold, edge_threshold, vocab)
        shown = [str(graph.nodes[i]) for i in records if graph.nodes[i].kind == "feature"]
        proposal = graph.supernodes(transcoders, candidates=shown)
        taken = {m for _, members in groups for m in members}
        proposed = [[name, list(members)] for name, members in proposal.groups if not taken & set(members)]
        groups += proposed
        # the groups awaiting a reader's decision in the viewer (accept, reject, rename, split, merge)
        report = {**proposal.report(), "proposed": [name for name, _ in proposed]}
    if chosen is not None or supernodes == "auto":
        graph = graph.subgraph(pinned, [[name, *members] for name, members in groups])
    return graph, explained, report
