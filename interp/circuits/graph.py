"""The computational graph of a transformer: nodes, their inputs, and the edges between them.

A *node* writes into the residual stream: ``input`` (the embeddings, everything that enters block 0), every
attention head ``L{l}.H{h}`` and every MLP ``L{l}.MLP``; ``logits`` only reads. Because the stream is a sum,
every node's input is the sum of what the nodes before it wrote, and an *edge* is one term of that sum: from
a node's output to another node's *input*. A head has three inputs, its query ``L{l}.H{h}.q`` and the keys and
values of its key/value head, ``L{l}.KV{g}.k`` and ``L{l}.KV{g}.v`` (shared by the query heads of group ``g``
under grouped-query attention, so a GQA model is not "ungrouped" into copies); an MLP has one, ``L{l}.MLP``,
and so do the logits, ``logits``.

Which nodes an input can read follows the block structure: every input of layer ``l`` reads ``input`` and every
node of the layers before it; a sequential block's MLP also reads its own layer's heads, a parallel block's
(GPT-NeoX: both sublayers read the block's input) does not. That holds only where each head's write is added to
the stream as it is. A norm applied to the *sum* of the heads' outputs before the add (Gemma 2/3's sandwich
norms, OLMo 2's output norms) or after it (post-norm BERT) leaves no per-head term in the stream, so such
models are refused with a message rather than approximated.

In a mixture-of-experts layer the MLP node is split into its experts: routed expert ``e`` is the node
``L{l}.E{e}``, whose write is its weighted output at the tokens routed to it (0 elsewhere), and a shared expert
(Qwen2-MoE) is ``L{l}.SE``, gate included; their writes sum to the layer's output. They all read one input, the
layer's ``L{l}.MLP``, which also feeds the router: an edge into it is scored through the router's choice and
weights as well as through the experts.

The graph is plain data: its structure is a few numbers, its names and edges are derived from them, it prints,
compares and round-trips through JSON, and scores and circuits are ``[n_sources, n_inputs]`` matrices over it.

>>> g = Graph(n_layers=2, n_heads=2, n_kv_heads=1)
>>> g.sources
('input', 'L0.H0', 'L0.H1', 'L0.MLP', 'L1.H0', 'L1.H1', 'L1.MLP')
>>> g.inputs[:5]
('L0.H0.q', 'L0.H1.q', 'L0.KV0.k', 'L0.KV0.v', 'L0.MLP')
>>> len(g.nodes), g.n_edges
(8, 36)
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from interp.analysis.node import Node

SUPPORTED_PLACEMENTS = ("pre",)

_REFUSALS = {
    "post": (
        "post-norm blocks (BERT, the original transformer) normalise the stream after each add, so no head "
        "or MLP has an input or an output term of its own in it"
    ),
    "sandwich": (
        "sandwich norms (Gemma 2/3) normalise the sum of a layer's heads before adding it to the stream, so "
        "one head's output is not a term of the stream and a per-head edge has no contribution of its own"
    ),
    "output": (
        "output norms (OLMo 2) normalise the sum of a layer's heads before adding it to the stream, so one "
        "head's output is not a term of the stream and a per-head edge has no contribution of its own"
    ),
}


class GraphStructureError(ValueError):
    """A model whose wiring the edge graph cannot express (the message says why, and what is supported)."""


class UnknownNameError(KeyError):
    """A node, input or edge name the graph does not have; the message suggests close names."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


@dataclass(frozen=True, kw_only=True)
class Graph:
    """Nodes, inputs and edges of a pre-norm transformer (see the module docstring).

    Args:
        n_layers: blocks.
        n_heads: query heads per layer.
        n_kv_heads: key/value heads per layer (``n_heads`` without grouped-query attention).
        parallel_attn_mlp: the MLP reads the block's input, not the stream after attention (GPT-NeoX), so
            there is no edge from a layer's heads to its own MLP.
        experts: routed experts per layer, one node each (0: a dense MLP, one node); empty for a dense model.
        shared_expert: each mixture-of-experts layer also has a shared expert node.
    """

    n_layers: int
    n_heads: int
    n_kv_heads: int
    parallel_attn_mlp: bool = False
    experts: tuple[int, ...] = ()
    shared_expert: bool = False

    def __post_init__(self) -> None:
        for name in ("n_layers", "n_heads", "n_kv_heads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Graph.{name} must be a positive integer, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}; each key/value "
                "head serves an equal group of query heads"
            )
        experts = tuple(self.experts)
        object.__setattr__(self, "experts", experts)
        if experts and (
            len(experts) != self.n_layers
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in experts)
        ):
            raise ValueError(
                f"Graph.experts must give a number of routed experts (0 for a dense MLP) for each of the "
                f"{self.n_layers} layers, got {list(experts)}"
            )
        if self.shared_expert and not any(experts):
            raise ValueError("Graph.shared_expert=True needs mixture-of-experts layers (Graph.experts)")

    @classmethod
    def from_model(cls, model: Any) -> Graph:
        """The graph of a :class:`~interp.HookedTransformer` (or of its config); refuses what it cannot express.

        Raises:
            GraphStructureError: the model's norms sit where a head's write is not a term of the stream.
        """
        cfg = getattr(model, "cfg", model)
        placement = cfg.norm_placement
        if placement not in SUPPORTED_PLACEMENTS:
            raise GraphStructureError(
                f"cannot build an edge graph for norm_placement={placement!r}: {_REFUSALS[placement]}. "
                "Circuits need pre-norm blocks (GPT-2, Llama, Mistral, Qwen 2/3, SmolLM2, Phi-3, Gemma 1, "
                "GPT-NeoX/Pythia)"
            )
        if cfg.embed_norm:
            raise GraphStructureError(
                "cannot build an edge graph for a model with a norm on the embeddings (embed_norm=True) in a "
                "pre-norm stack; the graph's input node is the stream entering block 0"
            )
        moe = getattr(cfg, "is_moe", False)
        return cls(
            n_layers=cfg.n_layers,
            n_heads=cfg.n_heads,
            n_kv_heads=cfg.n_kv_heads,
            parallel_attn_mlp=cfg.parallel_attn_mlp,
            experts=tuple(cfg.n_experts if t == "moe" else 0 for t in cfg.mlp_types) if moe else (),
            shared_expert=moe and cfg.d_shared_expert is not None,
        )

    # -- names ------------------------------------------------------------------------------------------

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.n_heads // self.n_kv_heads

    def mlp_nodes(self, layer: int) -> list[Node]:
        """The nodes that write layer ``layer``'s MLP output: ``L{l}.MLP``, or its experts (and shared expert)."""
        n = self.experts[layer] if self.experts else 0
        if not n:
            return [Node.mlp(layer)]
        return [Node.expert_node(layer, e) for e in range(n)] + (
            [Node.shared_expert(layer)] if self.shared_expert else []
        )

    @functools.cached_property
    def sources(self) -> tuple[Node, ...]:
        """Nodes that write into the stream, in forward order: ``input``, then per layer its heads and its MLP
        (or its experts)."""
        names = [Node.input()]
        for layer in range(self.n_layers):
            names += [Node.head_node(layer, h) for h in range(self.n_heads)] + self.mlp_nodes(layer)
        return tuple(names)

    @functools.cached_property
    def layer_starts(self) -> tuple[int, ...]:
        """The source row of each layer's first head, and, last, the number of sources."""
        starts = [1]
        for layer in range(self.n_layers):
            starts.append(starts[-1] + self.n_heads + len(self.mlp_nodes(layer)))
        return tuple(starts)

    @functools.cached_property
    def nodes(self) -> tuple[Node, ...]:
        """Every node: the sources and ``logits``."""
        return (*self.sources, Node.output())

    @functools.cached_property
    def inputs(self) -> tuple[Node, ...]:
        """Node inputs in forward order: per layer the queries, keys, values and the MLP; then ``logits``."""
        names = []
        for layer in range(self.n_layers):
            names += [Node.query(layer, h) for h in range(self.n_heads)]
            names += [Node.key(layer, g) for g in range(self.n_kv_heads)]
            names += [Node.value(layer, g) for g in range(self.n_kv_heads)]
            names.append(Node.mlp(layer))
        return (*names, Node.output())

    @property
    def inputs_per_layer(self) -> int:
        return self.n_heads + 2 * self.n_kv_heads + 1

    @functools.cached_property
    def _source_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.sources)}

    @functools.cached_property
    def _input_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.inputs)}

    def source_index(self, name: str) -> int:
        """Row of a source node in score and circuit matrices."""
        return _lookup(self._source_index, name, "source node", "logits only reads")

    def input_index(self, name: str) -> int:
        """Column of a node input in score and circuit matrices."""
        head, _, port = str(name).rpartition(".")
        if port in ("k", "v") and name not in self._input_index:
            node = _parse_or_none(head)
            if node is not None and node.kind == "head" and node.head < self.n_heads:
                make = Node.key if port == "k" else Node.value
                meant = make(node.layer, node.head // self.group_size)
                raise UnknownNameError(
                    f"the graph has no node input {name!r}: keys and values are inputs of key/value heads; "
                    f"did you mean {meant!r}?"
                )
        return _lookup(self._input_index, name, "node input", "heads have inputs .q, KV{g}.k and KV{g}.v")

    def n_readable(self, column: int) -> int:
        """How many sources (a prefix of :attr:`sources`) input ``column`` can read."""
        if column == len(self.inputs) - 1:
            return len(self.sources)
        layer, offset = divmod(column, self.inputs_per_layer)
        before = self.layer_starts[layer]
        is_mlp = offset == self.inputs_per_layer - 1
        return before + self.n_heads if is_mlp and not self.parallel_attn_mlp else before

    def heads_of(self, input_name: str) -> list[Node]:
        """The head or MLP nodes that read through an input (a KV input serves its whole group, a mixture of
        experts' input all its experts)."""
        node = self.inputs[self.input_index(input_name)]  # raises on an unknown name
        if node.kind == "query":
            return [Node.head_node(node.layer, node.head)]
        if node.kind in ("key", "value"):
            size = self.group_size
            return [Node.head_node(node.layer, h) for h in range(node.group * size, (node.group + 1) * size)]
        return self.mlp_nodes(node.layer) if node.kind == "mlp" else [node]

    # -- edges ------------------------------------------------------------------------------------------

    @functools.cached_property
    def allowed(self) -> torch.Tensor:
        """``[n_sources, n_inputs]`` boolean: which (source, input) pairs are edges."""
        rows = torch.arange(len(self.sources))[:, None]
        limit = torch.tensor([self.n_readable(c) for c in range(len(self.inputs))])
        return rows < limit[None, :]

    @property
    def n_edges(self) -> int:
        return int(self.allowed.sum())

    def edges(self) -> list[tuple[str, str]]:
        """Every edge ``(source, input)``, by input then source, in forward order."""
        return [
            (self.sources[i], name) for j, name in enumerate(self.inputs) for i in range(self.n_readable(j))
        ]

    def edge_index(self, edge: tuple[str, str] | list[str]) -> tuple[int, int]:
        """``(row, column)`` of an edge; raises naming what is wrong when the graph has no such edge."""
        if not isinstance(edge, (tuple, list)) or len(edge) != 2:
            raise ValueError(f"an edge is a (source, input) pair such as ('input', 'L0.MLP'), got {edge!r}")
        source, target = edge
        i, j = self.source_index(source), self.input_index(target)
        if i >= self.n_readable(j):
            raise ValueError(
                f"the graph has no edge {source!r} -> {target!r}: {target} reads only "
                f"{_readable_text(self, j)}"
            )
        return i, j

    # -- data -------------------------------------------------------------------------------------------

    def to_dict(self, *, edges: bool = False) -> dict[str, Any]:
        """The structure and counts; with ``edges=True`` also every node, input and edge name."""
        out: dict[str, Any] = {
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "parallel_attn_mlp": self.parallel_attn_mlp,
            "experts": list(self.experts),
            "shared_expert": self.shared_expert,
            "n_nodes": len(self.nodes),
            "n_inputs": len(self.inputs),
            "n_edges": self.n_edges,
        }
        if edges:
            out.update(
                nodes=list(self.nodes), inputs=list(self.inputs), edges=[list(e) for e in self.edges()]
            )
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Graph:
        """The graph a :meth:`to_dict` describes (its counts, when present, must agree)."""
        graph = cls(
            n_layers=data["n_layers"],
            n_heads=data["n_heads"],
            n_kv_heads=data["n_kv_heads"],
            parallel_attn_mlp=bool(data.get("parallel_attn_mlp", False)),
            experts=tuple(data.get("experts", ())),
            shared_expert=bool(data.get("shared_expert", False)),
        )
        for key in ("n_nodes", "n_inputs", "n_edges"):
            expected = graph.to_dict()[key]
            if key in data and data[key] != expected:
                raise ValueError(f"graph data says {key}={data[key]}, but its structure gives {expected}")
        return graph

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the graph, with every name and edge, as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(edges=True), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Graph:
        return cls.from_dict(json.loads(Path(path).read_text()))

    def __str__(self) -> str:
        kind = f", {self.n_kv_heads} key/value heads" if self.n_kv_heads != self.n_heads else ""
        par = ", parallel attention and MLP" if self.parallel_attn_mlp else ""
        moe = [n for n in self.experts if n]
        if moe:
            shared = " and a shared expert" if self.shared_expert else ""
            par += f", {len(moe)} mixture-of-experts layers of {max(moe)} experts{shared}"
        return (
            f"Graph({self.n_layers} layers x {self.n_heads} heads{kind}{par}: {len(self.nodes)} nodes, "
            f"{len(self.inputs)} inputs, {self.n_edges} edges)"
        )


def _lookup(index: dict[str, int], name: str, what: str, hint: str) -> int:
    if name in index:
        return index[name]
    close = difflib.get_close_matches(str(name), list(index), n=3)
    suggestion = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else f" ({hint})"
    raise UnknownNameError(f"the graph has no {what} {name!r}{suggestion}")


def _parse_or_none(text: str) -> Node | None:
    try:
        return Node.parse(text)
    except ValueError:
        return None


def _readable_text(graph: Graph, column: int) -> str:
    n = graph.n_readable(column)
    last = graph.sources[n - 1]
    return "the input" if n == 1 else f"the input and the nodes up to {last}"
