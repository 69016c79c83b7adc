"""Choosing a circuit from edge scores: the top ``n`` edges, or a greedy growth from the logits, then pruning.

- :func:`top_n` keeps the ``n`` edges of largest ``|score|`` (or largest score, with ``absolute=False``).
- :func:`greedy` grows the circuit from ``logits`` backwards: at each step it adds the best-scoring edge into
  a node already in the circuit (as EAP-IG's greedy search does), so every edge it picks reaches the logits.
- :func:`prune` drops edges that lie on no path from ``input`` to ``logits``: their source is not reached from
  the input through kept edges, or their target node reaches the logits through none. A head is reached through
  any of its inputs (its query, or the keys and values of its key/value head).

Ties in score are broken by graph order (earlier sources, then earlier inputs), so a selection is
deterministic.
"""

from __future__ import annotations

import functools
import heapq

import torch

from interp.circuits.circuit import Circuit
from interp.circuits.edge_attribution import EdgeScores
from interp.circuits.graph import Graph


@functools.lru_cache(maxsize=8)
def _input_nodes(graph: Graph) -> tuple[tuple[int, ...], ...]:
    """For each input column, the source rows of the node(s) reading through it (``()`` for the logits)."""
    out = []
    for name in graph.inputs:
        nodes = graph.heads_of(name)
        out.append(() if nodes == ["logits"] else tuple(graph.source_index(n) for n in nodes))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _node_inputs(graph: Graph) -> tuple[tuple[int, ...], ...]:
    """For each source row, the input columns it reads through (``()`` for ``input``)."""
    reads: list[list[int]] = [[] for _ in graph.sources]
    for j, rows in enumerate(_input_nodes(graph)):
        for i in rows:
            reads[i].append(j)
    return tuple(tuple(r) for r in reads)


def prune(circuit: Circuit) -> Circuit:
    """The edges of ``circuit`` that lie on a path from ``input`` to ``logits``."""
    graph, mask = circuit.graph, circuit.mask
    targets = _input_nodes(graph)
    reached = torch.zeros(len(graph.sources), dtype=torch.bool)
    reached[0] = True
    for j, rows in enumerate(targets):  # columns in forward order: a column reads only earlier nodes
        if rows and bool((mask[:, j] & reached).any()):
            reached[list(rows)] = True
    reaches = torch.zeros(len(graph.sources), dtype=torch.bool)
    useful = torch.zeros(len(graph.inputs), dtype=torch.bool)
    for j in range(len(targets) - 1, -1, -1):  # backwards: a node's readers come after its own inputs
        rows = targets[j]
        if not rows or bool(reaches[list(rows)].any()):
            useful[j] = True
            reaches |= mask[:, j]
    return Circuit(graph, mask & reached[:, None] & useful[None, :])


def _ranking(scores: EdgeScores | torch.Tensor, graph: Graph, absolute: bool) -> torch.Tensor:
    values = scores.scores if isinstance(scores, EdgeScores) else scores
    if tuple(values.shape) != tuple(graph.allowed.shape):
        raise ValueError(
            f"scores have shape {list(values.shape)}; the graph needs {list(graph.allowed.shape)}"
        )
    values = values.detach().float().cpu()
    values = values.abs() if absolute else values
    return values.masked_fill(~graph.allowed, float("-inf"))


def _check_n(n: int, graph: Graph) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n={n!r}; give the number of edges to keep, 0..{graph.n_edges}")
    return min(n, graph.n_edges)


def top_n(scores: EdgeScores, n: int, *, absolute: bool = True, prune_paths: bool = True) -> Circuit:
    """The ``n`` best-scoring edges (by ``|score|``, or by score with ``absolute=False``), pruned to complete
    paths unless ``prune_paths=False``."""
    graph = scores.graph
    n = _check_n(n, graph)
    flat = _ranking(scores, graph, absolute).flatten()
    order = torch.argsort(flat, descending=True, stable=True)[:n]
    mask = torch.zeros(flat.shape, dtype=torch.bool)
    mask[order] = True
    circuit = Circuit(graph, mask.view_as(graph.allowed))
    return prune(circuit) if prune_paths else circuit


def greedy(scores: EdgeScores, n: int, *, absolute: bool = True, prune_paths: bool = True) -> Circuit:
    """Grow ``n`` edges from the logits backwards, best edge into the circuit's nodes first, then prune."""
    graph = scores.graph
    n = _check_n(n, graph)
    rank = _ranking(scores, graph, absolute)
    n_inputs = len(graph.inputs)
    heap: list[tuple[float, int]] = []
    opened: set[int] = set()

    def open_column(j: int) -> None:
        if j in opened:
            return
        opened.add(j)
        for i in range(graph.n_readable(j)):
            heapq.heappush(heap, (-float(rank[i, j]), i * n_inputs + j))

    open_column(n_inputs - 1)
    mask = torch.zeros_like(graph.allowed)
    in_circuit = set()
    reads = _node_inputs(graph)
    kept = 0
    while heap and kept < n:
        _, k = heapq.heappop(heap)
        i, j = divmod(k, n_inputs)
        mask[i, j] = True
        kept += 1
        if i not in in_circuit:
            in_circuit.add(i)
            for column in reads[i]:
                open_column(column)
    circuit = Circuit(graph, mask)
    return prune(circuit) if prune_paths else circuit
