"""What ``interp attribute`` adds to a graph so it can be read: explained attention edges, a subgraph read from a
file and proposed supernodes, merged into one subgraph (the file's supernodes first; a proposed group that
shares a node with one of them is left out)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from interp.circuits.features.attention import attention_edges, explain_edges
from interp.circuits.features.neuronpedia import pruned_parts
from interp.circuits.features.subgraph import SubgraphFile, subgraph_file


def readable(
    graph: Any,
    model: Any,
    transcoders: Any,
    *,
    explain: int = 0,
    supernodes: str | None = None,
    subgraph: str | Path | SubgraphFile | None = None,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    say: Callable[[str], None] | None = None,
) -> tuple[Any, list, dict[str, Any] | None]:
    """``(graph with its subgraph, explained edges, supernode report)``.

    Args:
        explain: explain the ``explain`` strongest edges between positions of the pruned graph.
        supernodes: ``"auto"``: propose supernodes among the feature nodes the pruned graph keeps.
        subgraph: a JSON file of pinned nodes and supernodes, or what :func:`~.subgraph.subgraph_file` read of
            one.
        say: called with a line as each step that takes a while starts and ends (the command prints them), so
            a long step is never silent.
    """
    if supernodes not in (None, "auto"):
        raise ValueError(f"supernodes must be 'auto' or None, got {supernodes!r}")
    vocab = getattr(getattr(model, "cfg", None), "d_vocab", None)
    if subgraph is not None and not isinstance(subgraph, SubgraphFile):
        subgraph = subgraph_file(subgraph)
    chosen = subgraph.resolve(graph, vocab) if subgraph is not None else None
    explained = []
    if explain:
        with _step(say, f"explaining the {explain} strongest attention edges between positions") as done:
            edges = attention_edges(graph, explain, node_threshold, edge_threshold)
            explained = explain_edges(model, transcoders, graph, edges)
            done(f"{len(explained)} explained")
    report = None
    pinned = list(chosen.pinned) if chosen is not None else []
    groups = [list(g) for g in chosen.supernodes] if chosen is not None else []
    if supernodes == "auto":
        records, _ = pruned_parts(graph, node_threshold, edge_threshold, vocab)
        shown = [str(graph.nodes[i]) for i in records if graph.nodes[i].kind == "feature"]
        with _step(
            say, f"proposing supernodes among {len(shown)} feature node{'s' * (len(shown) != 1)}"
        ) as done:
            proposal = graph.supernodes(transcoders, candidates=shown)
            taken = {m for _, members in groups for m in members}
            proposed = [
                [name, list(members)] for name, members in proposal.groups if not taken & set(members)
            ]
            done(f"{len(proposed)} proposed")
        groups += proposed
        # the groups awaiting a reader's decision in the viewer (accept, reject, rename, split, merge)
        report = {**proposal.report(), "proposed": [name for name, _ in proposed]}
    if chosen is not None or supernodes == "auto":
        graph = graph.subgraph(pinned, [[name, *members] for name, members in groups])
    return graph, explained, report


@contextlib.contextmanager
def _step(say: Callable[[str], None] | None, what: str) -> Iterator[Callable[[str], None]]:
    """Say ``WHAT ...`` through ``say`` as a step starts and ``WHAT: RESULT in S s`` as it ends; the block gives
    the result to the callable it is handed."""
    result = ["done"]
    began = time.perf_counter()
    if say is not None:
        say(f"{what} ...")
    yield lambda text: result.__setitem__(0, text)
    if say is not None:
        say(f"{what}: {result[0]} in {time.perf_counter() - began:.1f} s")
