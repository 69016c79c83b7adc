"""A circuit: a set of edges of a :class:`~interp.circuits.graph.Graph`.

Stored as a boolean ``[n_sources, n_inputs]`` matrix over the graph (the form the patched forward pass reads),
shown and saved as a list of ``[source, input]`` names. Two circuits are equal when their graphs and edges are.

>>> from interp.circuits import Graph
>>> g = Graph(n_layers=1, n_heads=2, n_kv_heads=2)
>>> c = Circuit.from_edges(g, [("input", "L0.H1.q"), ("L0.H1", "logits")])
>>> c.edges, c.n_edges
([('input', 'L0.H1.q'), ('L0.H1', 'logits')], 2)
>>> Circuit.from_dict(c.to_dict()) == c
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from interp.analysis.node import Node
from interp.circuits.graph import Graph


@dataclass(frozen=True, eq=False)
class Circuit:
    """Edges of ``graph`` kept; ``mask`` is ``[n_sources, n_inputs]`` boolean, within ``graph.allowed``."""

    graph: Graph
    mask: torch.Tensor

    def __post_init__(self) -> None:
        shape = (len(self.graph.sources), len(self.graph.inputs))
        if not isinstance(self.mask, torch.Tensor) or tuple(self.mask.shape) != shape:
            got = tuple(self.mask.shape) if isinstance(self.mask, torch.Tensor) else type(self.mask).__name__
            raise ValueError(
                f"a circuit's mask must be a [n_sources, n_inputs] = {list(shape)} tensor, got {got}"
            )
        mask = self.mask.detach().to("cpu", torch.bool)
        outside = mask & ~self.graph.allowed
        if bool(outside.any()):
            i, j = (int(x) for x in outside.nonzero()[0])
            self.graph.edge_index((self.graph.sources[i], self.graph.inputs[j]))  # raises, naming the edge
        object.__setattr__(self, "mask", mask)

    @classmethod
    def from_edges(cls, graph: Graph, edges: Iterable[tuple[str, str] | list[str]]) -> Circuit:
        """The circuit of the named ``(source, input)`` edges; an edge the graph lacks raises, naming it."""
        mask = torch.zeros(len(graph.sources), len(graph.inputs), dtype=torch.bool)
        for edge in edges:
            mask[graph.edge_index(edge)] = True
        return cls(graph, mask)

    @classmethod
    def full(cls, graph: Graph) -> Circuit:
        """Every edge: running it is running the clean model."""
        return cls(graph, graph.allowed.clone())

    @classmethod
    def empty(cls, graph: Graph) -> Circuit:
        """No edge: running it is running the corrupted model."""
        return cls(graph, torch.zeros_like(graph.allowed))

    @property
    def n_edges(self) -> int:
        return int(self.mask.sum())

    @property
    def edges(self) -> list[tuple[Node, Node]]:
        """The kept edges, by input then source, in forward order."""
        rows, cols = self.mask.T.nonzero(as_tuple=True)  # column-major: by input, then source
        return [
            (self.graph.sources[int(i)], self.graph.inputs[int(j)]) for j, i in zip(rows, cols, strict=True)
        ]

    @property
    def nodes(self) -> list[Node]:
        """Nodes touched by a kept edge (as a source or through one of their inputs), in graph order."""
        touched = {self.graph.sources[i] for i in self.mask.any(1).nonzero().flatten().tolist()}
        for j in self.mask.any(0).nonzero().flatten().tolist():
            touched.update(self.graph.heads_of(self.graph.inputs[j]))
        return [n for n in self.graph.nodes if n in touched]

    @property
    def heads(self) -> list[tuple[int, int]]:
        """``(layer, head)`` of every head among :attr:`nodes`."""
        return [(n.layer, n.head) for n in self.nodes if n.kind == "head"]

    def __contains__(self, edge: Any) -> bool:
        return bool(self.mask[self.graph.edge_index(edge)])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Circuit):
            return NotImplemented
        return self.graph == other.graph and torch.equal(self.mask, other.mask)

    def __repr__(self) -> str:
        return f"Circuit({self.n_edges} of {self.graph.n_edges} edges, {len(self.nodes)} nodes)"

    def union(self, other: Circuit) -> Circuit:
        if other.graph != self.graph:
            raise ValueError(f"cannot join circuits of different graphs: {self.graph} and {other.graph}")
        return Circuit(self.graph, self.mask | other.mask)

    # -- data -------------------------------------------------------------------------------------------

    def to_dict(self, scores: torch.Tensor | None = None) -> dict[str, Any]:
        """``{"graph": ..., "n_edges": n, "edges": [[source, input], ...]}``, with each edge's score if given."""
        edges: list[list[Any]] = [list(e) for e in self.edges]
        if scores is not None:
            for edge in edges:
                edge.append(float(scores[self.graph.edge_index(edge[:2])]))
        return {"graph": self.graph.to_dict(), "n_edges": self.n_edges, "edges": edges}

    @classmethod
    def from_dict(cls, data: dict[str, Any], graph: Graph | None = None) -> Circuit:
        """The circuit a :meth:`to_dict` describes, on ``graph`` (checked against the stored one) or on its own."""
        stored = Graph.from_dict(data["graph"]) if "graph" in data else None
        if graph is None:
            if stored is None:
                raise ValueError("circuit data has no 'graph'; pass the graph it belongs to")
            graph = stored
        elif stored is not None and stored != graph:
            raise ValueError(f"the circuit was saved for {stored}, not for {graph}")
        circuit = cls.from_edges(graph, [tuple(e[:2]) for e in data["edges"]])
        if "n_edges" in data and data["n_edges"] != circuit.n_edges:
            raise ValueError(f"circuit data says n_edges={data['n_edges']} but lists {circuit.n_edges} edges")
        return circuit

    def save(self, path: str | os.PathLike[str], scores: torch.Tensor | None = None) -> None:
        Path(path).write_text(json.dumps(self.to_dict(scores), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str], graph: Graph | None = None) -> Circuit:
        """Read a circuit written by :meth:`save`.

        Raises:
            ValueError: The file is not valid JSON (cut short, or not a circuit file); the message names it.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} is not a circuit file: it is not valid JSON ({err})") from None
        return cls.from_dict(data, graph)
