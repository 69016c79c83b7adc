"""A subgraph file checked before attribution: its nodes found among those the prompt's graph will have.

A graph's nodes are known before its backward passes: the frozen forward pass gives the active features and the
logit targets (the pass and the choice :func:`~interp.circuits.features.attribute` makes, so the same ones),
and the errors and tokens follow from the prompt. :func:`check_pins` resolves a subgraph file
(:class:`~interp.circuits.features.subgraph.SubgraphFile`) against them, so that a node the graph will lack, or a
Neuronpedia id two of its nodes share, is refused in one line before any backward pass rather than after all of
them; the pinned features it returns go to ``attribute(keep=...)``, so that a cap on feature nodes
(``max_feature_nodes``) keeps them as pruning does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.analysis.node import Node
from interp.circuits.features.graph import GraphNodes
from interp.circuits.features.subgraph import SubgraphFile
from interp.dictionary import SparseDictionary


@dataclass(frozen=True, eq=False)
class Prospect(GraphNodes):
    """The nodes of a prompt's attribution graph, before it is computed: what
    :func:`~interp.circuits.features.subgraph.SubgraphFile.resolve` reads of a graph.

    Attributes:
        input_tokens: ``[pos]`` the prompt's ids.
        logit_tokens: ``[n_logits]`` the targets' ids (-1 for a direction).
        n_layers: layers of the model.
        features: ``[n_active, 3]`` (layer, position, feature) of the active features, in the graph's order.
        widths: features per layer.
    """

    input_tokens: torch.Tensor
    logit_tokens: torch.Tensor
    n_layers: int
    features: torch.Tensor
    widths: dict[int, int]

    def _missing(self, node: str) -> str:
        return f"the graph will have no node {str(node)!r}: {self._why(Node.parse(node))}"

    def _why(self, node: Node) -> str:
        last = self.n_pos - 1
        if node.position is not None and node.position > last:
            return f"the prompt has {self.n_pos} tokens, at positions 0 to {last}"
        if node.layer is not None and node.layer >= self.n_layers:
            return f"the model has {self.n_layers} layers, 0 to {self.n_layers - 1}"
        if node.kind == "logit":
            return f"there are {self.n_logits} logit targets, logit.0 to logit.{self.n_logits - 1}"
        if node.kind != "feature":
            return "graphs have feature, error, token and logit nodes"
        if node.feature >= self.widths[node.layer]:
            return f"layer {node.layer} has {self.widths[node.layer]} features"
        if node.position == 0:
            return "nothing is attributed at position 0, which holds the special token"
        return f"feature {node.feature} of layer {node.layer} is not active at position {node.position}"


def prospect(
    model: Any,
    transcoders: SparseDictionary,
    prompt: str | torch.Tensor | Sequence[int],
    *,
    targets: Sequence[Any] | None = None,
    max_logits: int = 10,
    logit_probability: float = 0.95,
) -> Prospect:
    """The nodes ``attribute(model, transcoders, prompt, ...)`` will give its graph, from one frozen forward pass."""
    from interp.circuits.features.frozen import frozen_run
    from interp.circuits.features.inputs import check_fit, prompt_ids
    from interp.circuits.features.node_vectors import find_sources
    from interp.circuits.features.targets import select

    check_fit(model, transcoders)
    tokens = prompt_ids(model, prompt)
    was_training = model.training
    model.eval()
    try:
        run = frozen_run(model, tokens, transcoders)
        active = find_sources(run, transcoders, model.cfg.n_layers).features.cpu()
        chosen = select(model, run.logits, targets, max_logits, logit_probability)
    finally:
        model.train(was_training)
    return Prospect(
        input_tokens=tokens.cpu(),
        logit_tokens=torch.tensor([-1 if t.token is None else t.token for t in chosen]),
        n_layers=model.cfg.n_layers,
        features=active,
        widths={layer: transcoders.n_features(layer) for layer in transcoders.layers},
    )


def check_pins(
    found: SubgraphFile, graph: Prospect, *, vocab: int | None = None, max_feature_nodes: int | None = None
) -> list[str]:
    """The pinned feature nodes of ``found``, once every node it names is one of ``graph``'s (a
    :class:`Prospect`) and a cap on feature nodes can keep them all.

    Raises:
        ValueError: one line naming the file, the field and the node, and why the graph will lack it; or more
            pinned features than ``max_feature_nodes``.
    """
    selection = found.resolve(graph, vocab)
    features = [name for name in selection.pinned if Node.parse(name).kind == "feature"]
    if max_feature_nodes is not None and len(features) > max_feature_nodes:
        raise ValueError(
            f"--subgraph {found.path} pins {len(features)} feature nodes, more than --max-feature-nodes "
            f"{max_feature_nodes} keeps; raise --max-feature-nodes to at least {len(features)}"
        )
    return features
