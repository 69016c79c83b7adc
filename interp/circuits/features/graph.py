"""AttributionGraph: the direct effects between features, errors, tokens and logit targets of one prompt.

Plain data, in circuit-tracer's node order so graphs move between the tools: the feature nodes (layer-major,
then position, then feature), one error node per (layer, position) layer-major, one token node per position,
then the logit targets. ``adjacency [N, N]`` has rows as targets and columns as sources: ``A[t, s]`` is the
source's activation times the derivative of the target's pre-activation (or de-meaned logit) in the frozen
model. Rows of errors and tokens are zero (nothing is attributed into them).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from interp.analysis.node import Node
from interp.circuits.features import influence as inf
from interp.circuits.features.graph_folder import (
    GRAPH_FILE,
    PAGE,
    check_folder,
    check_generation,
    new_generation,
    write_folder,
)
from interp.circuits.features.subgraph import Subgraph, make_subgraph
from interp.dictionary import SparseDictionary


class GraphNodes:
    """The nodes of a graph of ``features [n, 3]`` (layer, position, feature), ``n_layers``, ``input_tokens`` and
    ``logit_tokens``, in circuit-tracer's order (see the module docstring): what a graph and the nodes one will
    have (:class:`~interp.circuits.features.pins.Prospect`) share. A subclass says why a node is missing."""

    features: torch.Tensor
    input_tokens: torch.Tensor
    logit_tokens: torch.Tensor
    n_layers: int

    @property
    def n_pos(self) -> int:
        return len(self.input_tokens)

    @property
    def n_logits(self) -> int:
        return len(self.logit_tokens)

    @functools.cached_property
    def nodes(self) -> tuple[Node, ...]:
        """Every node, in the adjacency's order."""
        feats = [Node.feature_node(int(lay), int(p), int(f)) for lay, p, f in self.features.tolist()]
        errors = [Node.error(lay, p) for lay in range(self.n_layers) for p in range(self.n_pos)]
        tokens = [Node.token(p) for p in range(self.n_pos)]
        return (*feats, *errors, *tokens, *(Node.logit(i) for i in range(self.n_logits)))

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {node: i for i, node in enumerate(self.nodes)}

    def index(self, node: str) -> int:
        """Row and column of ``node`` (a :class:`~interp.analysis.node.Node` or its text)."""
        if node not in self._index:
            raise KeyError(self._missing(node))
        return self._index[node]

    def _missing(self, node: str) -> str:
        return f"the graph has no node {str(node)!r}; it has {len(self.nodes)} (e.g. {self.nodes[0]!r})"


@dataclass(frozen=True, eq=False)
class AttributionGraph(GraphNodes):
    """An attribution graph (see the module docstring).

    Attributes:
        adjacency: ``[N, N]`` float32, rows targets, columns sources.
        features: ``[n_features, 3]`` int64 (layer, position, feature) of the feature nodes.
        activations: ``[n_features]`` their activations.
        input_tokens: ``[n_pos]`` the prompt's token ids.
        logit_tokens: ``[n_logits]`` token ids of the targets (-1 for a custom direction).
        logit_probabilities: ``[n_logits]`` the targets' weights (probabilities, for tokens).
        n_layers: layers of the model (one error node per layer and position).
        logit_labels: the targets' labels.
        metadata: model, transcoders, prompt (strings).
        selection: pinned nodes and supernodes (:meth:`subgraph`), saved in the file's ``qParams``.
    """

    adjacency: torch.Tensor
    features: torch.Tensor
    activations: torch.Tensor
    input_tokens: torch.Tensor
    logit_tokens: torch.Tensor
    logit_probabilities: torch.Tensor
    n_layers: int
    logit_labels: tuple[str, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    selection: Subgraph | None = None

    def __post_init__(self) -> None:
        n = len(self.features) + (self.n_layers + 1) * self.n_pos + self.n_logits
        if tuple(self.adjacency.shape) != (n, n):
            raise ValueError(
                f"adjacency has shape {tuple(self.adjacency.shape)}; {len(self.features)} features, "
                f"{self.n_layers} layers x {self.n_pos} positions and {self.n_logits} logits make [{n}, {n}]"
            )
        if not self.logit_labels:
            object.__setattr__(self, "logit_labels", tuple(str(int(t)) for t in self.logit_tokens))

    # -- nodes ------------------------------------------------------------------------------------------

    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def n_errors(self) -> int:
        return self.n_layers * self.n_pos

    def edge(self, target: str, source: str) -> float:
        """``A[target, source]``: the direct effect of ``source`` on ``target``."""
        return float(self.adjacency[self.index(target), self.index(source)])

    @property
    def logit_weights(self) -> torch.Tensor:
        """``[N]``: the targets' probabilities at the logit nodes, zero elsewhere."""
        w = torch.zeros(len(self.nodes))
        w[-self.n_logits :] = self.logit_probabilities.float()
        return w

    # -- analysis ---------------------------------------------------------------------------------------

    def influence(self) -> torch.Tensor:
        """``[N]`` each node's total influence on the logit targets (row-normalised ``|A|``)."""
        return inf.influence(inf.normalise(self.adjacency.float()), self.logit_weights)

    @property
    def pinned(self) -> torch.Tensor:
        """``[N]``: the nodes :attr:`selection` pins (supernodes' members included)."""
        mask = torch.zeros(len(self.nodes), dtype=torch.bool)
        if self.selection is not None:
            mask[[self.index(name) for name in self.selection.pinned]] = True
        return mask

    def prune(self, node_threshold: float = 0.8, edge_threshold: float = 0.98) -> inf.Pruned:
        """The nodes and edges that carry ``node_threshold`` and ``edge_threshold`` of the influence, and the
        :attr:`pinned` nodes, which pruning never drops (a reader pinned them to see them)."""
        return inf.prune_masks(
            self.adjacency.float(),
            self.logit_weights,
            self.n_features,
            self.n_pos,
            self.n_logits,
            node_threshold,
            edge_threshold,
            keep=self.pinned,
        )

    def scores(self) -> tuple[float, float]:
        """``(replacement, completeness)`` scores, as circuit-tracer's ``compute_graph_scores``."""
        return inf.graph_scores(
            self.adjacency.float(), self.logit_weights, self.n_features, self.n_errors, self.n_pos
        )

    def explain_attention(
        self,
        model: Any,
        transcoders: SparseDictionary,
        edge_or_node: str | tuple[str, str],
        *,
        top_heads: int = 3,
        other_key: int | None = None,
    ) -> Any:
        """Why attention carries an edge: its heads, and each top head's score from the target's position to
        the source's split into this graph's nodes (:mod:`~interp.circuits.features.attention`).

        Args:
            edge_or_node: ``(target, source)``, or a node (its strongest input from another position).
            top_heads: the heads with the largest loadings to explain.
            other_key: a second key position, for the difference of the two scores.

        Returns:
            An :class:`~interp.circuits.features.attention.AttentionExplanation`.
        """
        from interp.circuits.features.attention import explain_edges, strongest_input

        if isinstance(edge_or_node, tuple):
            edge = edge_or_node
        else:
            edge = (str(edge_or_node), strongest_input(self, edge_or_node))
        (found,) = explain_edges(model, transcoders, self, [edge], top_heads=top_heads, other_key=other_key)
        return found

    def subgraph(
        self,
        pinned: Sequence[str] = (),
        supernodes: Mapping[str, Sequence[str]] | Sequence[Sequence[str]] = (),
    ) -> AttributionGraph:
        """This graph with ``pinned`` nodes and named ``supernodes`` (``{name: nodes}`` or Neuronpedia's
        ``[[name, node, ...], ...]``), which :meth:`save` writes into the file's ``qParams``
        (:mod:`~interp.circuits.features.subgraph`); members of a supernode are pinned too."""
        return dataclasses.replace(self, selection=make_subgraph(self, pinned, supernodes))

    def supernodes(self, transcoders: SparseDictionary, **criterion: Any) -> Any:
        """Proposed groups of feature nodes that play one role, with the criterion and the influence the
        collapsed graph keeps (:func:`~interp.circuits.features.supernodes.propose_supernodes`; ``criterion``:
        its keyword arguments). ``graph.subgraph(supernodes=proposal.groups)`` adopts them."""
        from interp.circuits.features.supernodes import propose_supernodes

        return propose_supernodes(self, transcoders, **criterion)

    def intervene(
        self,
        model: Any,
        transcoders: SparseDictionary,
        edits: Sequence[Any] = (),
        *,
        supernode: str | None = None,
        scale: float | None = None,
        value: float | None = None,
        constrained: bool = False,
    ) -> Any:
        """Run this graph's prompt with ``edits`` (:class:`~interp.circuits.features.intervene.FeatureEdit`)
        and, with ``supernode``, every feature of that supernode of :attr:`selection` multiplied by ``scale``
        (``0`` ablates) or set to ``value`` at its position: constrained or free, in one call
        (:func:`~interp.circuits.features.intervene.intervene`)."""
        from interp.circuits.features.intervene import FeatureEdit, intervene

        edits = [edits] if isinstance(edits, FeatureEdit) else list(edits)
        if supernode is not None:
            groups = dict(self.selection.supernodes) if self.selection is not None else {}
            if supernode not in groups:
                raise KeyError(
                    f"the graph has no supernode {supernode!r}; it has {sorted(groups) or 'none'} "
                    "(make them with graph.subgraph(supernodes=...))"
                )
            if (scale is None) == (value is None):
                raise ValueError(
                    f"an intervention on supernode {supernode!r} sets scale or value, exactly one"
                )
            for name in groups[supernode]:
                node = Node.parse(name)
                if node.kind != "feature":
                    raise ValueError(
                        f"supernode {supernode!r} holds {name} ({node.kind}); only feature nodes can be edited"
                    )
                edits.append(FeatureEdit(node.layer, node.feature, node.position, value=value, scale=scale))
        return intervene(model, transcoders, self.input_tokens, edits, constrained=constrained)

    # -- files ------------------------------------------------------------------------------------------

    def tensors(self) -> dict[str, torch.Tensor]:
        """The tensors of ``graph.safetensors``."""
        return {
            "adjacency": self.adjacency.float().contiguous(),
            "features": self.features.long().contiguous(),
            "activations": self.activations.float().contiguous(),
            "input_tokens": self.input_tokens.long().contiguous(),
            "logit_tokens": self.logit_tokens.long().contiguous(),
            "logit_probabilities": self.logit_probabilities.float().contiguous(),
        }

    def save(
        self,
        folder: str | os.PathLike[str],
        *,
        node_threshold: float = 0.8,
        edge_threshold: float = 0.98,
        model: Any = None,
        transcoders: SparseDictionary | None = None,
        contexts: Mapping[tuple[int, int], Sequence[str]] | Any = None,
        slug: str = "graph",
        dashboards: str | os.PathLike[str] | None = None,
        attention: Sequence[Any] = (),
        supernode_report: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write ``graph.safetensors``, the pruned Neuronpedia-schema ``{slug}.json`` (``graph.json``), its entry
        in ``graph-metadata.json`` and the viewer ``index.html``: the folder circuit-tracer's local server serves.

        The files are written as one set, over only an earlier graph's files
        (:mod:`~interp.circuits.features.graph_folder`): an error or Ctrl-C while they are written leaves the
        folder's earlier graph whole, and a file of the same name that no save of a graph wrote is refused before
        anything is written. Pinned nodes (:attr:`selection`) are kept by the pruning.

        Args:
            folder: created if missing.
            node_threshold, edge_threshold: the pruning of ``graph.json`` and the page.
            model: gives the prompt's tokens as text, the vocabulary size past which ``graph.json`` numbers
                custom-direction targets (as circuit-tracer does; without a model, past the largest id seen)
                and, with ``transcoders``, the tokens each feature's decoder promotes.
            contexts: top activating contexts to show per feature: ``(layer, feature) -> texts``, or an
                :class:`~interp.store.ActivationStore` holding the transcoders' input hooks (read with
                :func:`~interp.circuits.features.contexts.top_contexts` for the features shown).
            slug: the graph's name: its file ``{slug}.json``, its entry in ``graph-metadata.json`` (replacing one
                of the same slug, as circuit-tracer's ``create_graph_files`` does), the key of the page's pins.
            dashboards: a folder of feature dashboards (``interp dashboards``; the dictionary's
                ``features/SCAN`` or the folder holding it): linked as ``features/SCAN`` beside the graph,
                named in its ``metadata.scan`` (``./data/features/SCAN``), and shown by the viewer; with
                ``model`` and ``transcoders``, refused unless they made it
                (:func:`~interp.sae.dashboards.link.check_identity`).
            attention: explained edges (:meth:`explain_attention`), saved in the file's ``interp`` extension
                (:mod:`~interp.circuits.features.extension`) and shown by the viewer.
            supernode_report: how proposed supernodes were found and what they keep, saved beside them.
        """
        from interp.circuits.features.neuronpedia import graph_json
        from interp.circuits.features.viewer import write_viewer
        from interp.sae.dashboards.folder import check_scan

        check_scan(slug, "--slug")
        out = check_folder(folder, slug, flag="folder")
        scan, features = None, None
        if dashboards is not None:
            from interp.sae.dashboards.link import check_identity, link, scan_path

            if model is not None and transcoders is not None:
                check_identity(dashboards, model, transcoders)
            out.mkdir(parents=True, exist_ok=True)
            name = link(out, dashboards)
            scan, features = scan_path(name), out / "features" / name
        generation = new_generation()
        meta = {
            **self.metadata,
            "n_layers": str(self.n_layers),
            "logit_labels": json.dumps(self.logit_labels),
            **({"subgraph": json.dumps(self.selection.to_json())} if self.selection is not None else {}),
            "generation": generation,
        }
        tokens = _token_texts(model, self.input_tokens)
        doc = graph_json(
            self,
            node_threshold=node_threshold,
            edge_threshold=edge_threshold,
            slug=slug,
            prompt_tokens=tokens,
            vocab=getattr(getattr(model, "cfg", None), "d_vocab", None),
            scan=scan,
        )
        doc = _extended(self, doc, model, attention, supernode_report, generation)
        if contexts is not None and not isinstance(contexts, Mapping):
            from interp.circuits.features.contexts import top_contexts

            shown = sorted({(n.layer, n.feature) for n in self.nodes if n.kind == "feature"})
            contexts = top_contexts(contexts, transcoders, shown)
        viewer = dict(
            node_threshold=node_threshold,
            edge_threshold=edge_threshold,
            model=model,
            transcoders=transcoders,
            contexts=contexts,
            dashboards=features,
        )
        out.mkdir(parents=True, exist_ok=True)
        write_folder(
            out,
            {
                GRAPH_FILE: lambda tmp: save_file(self.tensors(), str(tmp), metadata=meta),
                f"{slug}.json": lambda tmp: tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8"),
                PAGE: lambda tmp: write_viewer(tmp, self, doc, **viewer),
            },
            generation,
            doc["metadata"],
        )
        return out

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> AttributionGraph:
        """The graph a :meth:`save` wrote."""
        from safetensors import safe_open

        path = Path(folder) / GRAPH_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist; a graph folder holds {GRAPH_FILE}")
        with safe_open(str(path), "pt") as f:
            meta = dict(f.metadata() or {})
        check_generation(path, meta.pop("generation", None))
        t = load_file(str(path))
        n_layers = int(meta.pop("n_layers"))
        labels = tuple(json.loads(meta.pop("logit_labels", "[]")))
        graph = cls(**t, n_layers=n_layers, logit_labels=labels, metadata=meta)
        if "subgraph" in meta:
            saved = json.loads(meta.pop("subgraph"))
            graph = graph.subgraph(saved["pinned"], saved["supernodes"])
        return graph

    def __repr__(self) -> str:
        return (
            f"AttributionGraph({self.n_features} features, {self.n_layers} layers x {self.n_pos} positions, "
            f"{self.n_logits} logits)"
        )


def _extended(
    graph: AttributionGraph, doc: dict, model: Any, attention: Any, report: Any, generation: str
) -> dict:
    """``doc`` with the save's generation and, where given, the subgraph, explained edges and supernode report
    (:mod:`.extension`)."""
    from interp.circuits.features.extension import extend
    from interp.circuits.features.subgraph import neuronpedia_ids

    ids = {}
    if graph.selection is not None or attention:
        ids = neuronpedia_ids(graph, getattr(getattr(model, "cfg", None), "d_vocab", None))
    return extend(
        doc, ids, subgraph=graph.selection, attention=attention, criterion=report, generation=generation
    )


def _token_texts(model: Any, tokens: torch.Tensor) -> list[str] | None:
    tokenizer = getattr(model, "tokenizer", None)
    return None if tokenizer is None else [tokenizer.decode([t]) for t in tokens.tolist()]
