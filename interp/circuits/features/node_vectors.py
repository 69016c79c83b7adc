"""The nodes of an attribution graph and the vectors they read and write.

Active features are those with a non-zero activation at a position after the first (the first holds a special
token and, as in circuit-tracer, nothing is attributed there), listed layer-major, then by position, then by
feature. Each has an *encoder vector* (the gradient of its pre-activation with respect to its input hook: its
encoder row, since pre-activations are affine in the input) and a *decoder vector* per layer it writes
(activation times decoder row).

What a node writes is computed once, by :func:`node_writes`, for every reader: attribution (from the frozen
forward pass, :func:`find_sources`), head loadings and attention explained in graph nodes (from the clean run a
held model keeps, :func:`held_node_writes`). A feature writes its activation times its decoder rows into each
layer it writes; an error node is what the transcoder's reconstruction (decoder writes and ``b_dec``) misses of
the output hook less the skip term, zero at the first position; a token node is the token's embedding at
``hook_embed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from interp.circuits.features.frozen import FrozenRun
from interp.dictionary import SparseDictionary, written_layers


@dataclass
class NodeWrites:
    """Where each node of a graph writes, and what.

    Node ``i`` is numbered as in the graph: features first (in :attr:`features`' order), then the error of
    layer ``l`` at position ``p`` (``n_features + l * n_pos + p``), then the token at ``p``
    (``n_features + n_layers * n_pos + p``).

    Attributes:
        features: ``[n_features, 3]`` (layer, position, feature), layer-major.
        decoders: layer -> (the index of that layer's first feature, and ``[n, n_out, d_model]`` activation
            times decoder rows of its features, one slice per ``output_layers(layer)``).
        errors: ``[n_layers, pos, d_model]`` (zero at position 0).
        tokens: ``[pos, d_model]`` token embeddings.
    """

    features: torch.Tensor
    decoders: dict[int, tuple[int, torch.Tensor]]
    errors: torch.Tensor
    tokens: torch.Tensor

    def of(self, node: int, transcoders: SparseDictionary) -> list[tuple[str, int, torch.Tensor]]:
        """Where node ``node`` (its index) writes: ``(hook, position, vector [d_model])`` for each hook."""
        n_features, (n_layers, n_pos, _) = len(self.features), self.errors.shape
        if node < n_features:
            layer, position = (int(v) for v in self.features[node, :2])
            first, dec = self.decoders[layer]
            return [
                (transcoders.output_hook(out), position, dec[node - first, j])
                for j, out in enumerate(transcoders.output_layers(layer))
            ]
        layer, position = divmod(node - n_features, n_pos)
        if layer < n_layers:
            return [(transcoders.output_hook(layer), position, self.errors[layer, position])]
        return [("hook_embed", position, self.tokens[position])]

    def by_hook(
        self, transcoders: SparseDictionary
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Every write, gathered by hook: ``positions [m]``, ``vectors [m, d_model]`` (float32) and
        ``columns [m]`` (the node's index); a cross-layer feature appears once per layer it writes to."""
        found: dict[str, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}

        def add(name: str, positions: torch.Tensor, vectors: torch.Tensor, columns: torch.Tensor) -> None:
            found.setdefault(name, []).append((positions.cpu(), vectors.float(), columns.cpu()))

        for layer, (first, dec) in self.decoders.items():
            if not len(dec):
                continue
            columns = torch.arange(first, first + len(dec))
            for j, out in enumerate(transcoders.output_layers(layer)):
                add(transcoders.output_hook(out), self.features[columns, 1], dec[:, j], columns)
        n_features, (n_layers, n_pos, _) = len(self.features), self.errors.shape
        positions = torch.arange(n_pos)
        for layer in range(n_layers):
            add(
                transcoders.output_hook(layer),
                positions,
                self.errors[layer],
                n_features + layer * n_pos + positions,
            )
        add("hook_embed", positions, self.tokens, n_features + n_layers * n_pos + positions)
        return {
            name: tuple(torch.cat([r[i] for r in runs]) for i in range(3))  # type: ignore[misc]
            for name, runs in found.items()
        }


@torch.no_grad()
def node_writes(
    transcoders: SparseDictionary,
    features: torch.Tensor,
    activations: torch.Tensor,
    acts: Mapping[int, torch.Tensor],
    outputs: Mapping[int, torch.Tensor],
    embed: torch.Tensor,
    n_layers: int,
) -> NodeWrites:
    """What every node writes (see the module docstring).

    Args:
        features: ``[n_features, 3]`` (layer, position, feature), layer-major; ``activations``: ``[n_features]``.
        acts: layer -> ``[pos, d_transcoder]`` every feature's activation, for the reconstruction.
        outputs: written layer -> ``[pos, d_model]`` the output hook less the skip term (where there is one).
        embed: ``[pos, d_model]`` what ``hook_embed`` held.
    """
    decoders = {}
    layers = features[:, 0]
    for layer in transcoders.layers:
        rows = (layers == layer).nonzero().flatten()
        value = activations[rows.to(activations.device)].float()
        feat = features[rows, 2].to(acts[layer].device)
        dec = transcoders.decoder(layer, feat).detach().float() * value[:, None, None]  # [n, n_out, d_model]
        decoders[layer] = (int((layers < layer).sum()), dec)
    first = outputs[min(outputs)]
    errors = torch.zeros(n_layers, *first.shape, dtype=torch.float32, device=first.device)
    for layer, out in outputs.items():
        recon = transcoders.decode(acts, layer).detach().float()  # [pos, d_model]
        errors[layer] = out.float() - recon
    errors[:, 0] = 0
    return NodeWrites(features=features, decoders=decoders, errors=errors, tokens=embed.detach().float())


def held_node_writes(graph: Any, transcoders: SparseDictionary, clean: Any) -> NodeWrites:
    """:func:`node_writes` of ``graph``'s nodes from a clean run's cache ``clean`` (what
    :class:`~interp.circuits.features.held.Held` keeps): each layer's output less its skip term, as the frozen
    pass makes it."""
    tc = transcoders
    with torch.no_grad():
        inputs = {layer: clean[tc.input_hook(layer)][0] for layer in tc.layers}
        acts = {layer: tc.encode(x, layer)[1] for layer, x in inputs.items()}
        outputs = {}
        for out in written_layers(tc):
            x = clean[tc.output_hook(out)][0]
            skip = tc.skip(inputs[out], out) if out in inputs else None
            outputs[out] = x if skip is None else x - skip.to(x.dtype)
    embed = clean["hook_embed"][0]
    return node_writes(tc, graph.features, graph.activations, acts, outputs, embed, graph.n_layers)


@dataclass
class Sources(NodeWrites):
    """Active features and the vectors of every source node: their writes, and what attribution reads.

    Attributes:
        activations: ``[n_active]``.
        encoders: ``[n_active, d_model]``: d pre-activation / d input.
        runs: layer -> ``(position, start, end)`` for each position with active features: a layer's features
            are listed position by position, so those at one position are the global indices ``start:end``.
    """

    activations: torch.Tensor
    encoders: torch.Tensor
    runs: dict[int, list[tuple[int, int, int]]]


def find_sources(run: FrozenRun, transcoders: SparseDictionary, n_layers: int) -> Sources:
    """Active features, their encoder and decoder vectors, the error and token vectors of ``run``."""
    found, values, acts_of, encoders, runs = [], [], {}, [], {}
    start = 0
    for layer in transcoders.layers:
        x = run.inputs[layer][0].detach()  # [pos, d_model]
        with torch.no_grad():
            acts = transcoders.encode(x, layer)[1].clone()  # [pos, d_transcoder]
        acts[0] = 0
        acts_of[layer] = acts
        where = acts.nonzero()  # [n, 2] (position, feature), position-major
        pos, feat = where[:, 0], where[:, 1]
        encoders.append(transcoders.encoder(layer, feat).detach().to(x.device))
        where, counts = torch.unique_consecutive(pos, return_counts=True)
        ends = (start + counts.cumsum(0)).tolist()
        runs[layer] = [
            (p, end - c, end) for p, end, c in zip(where.tolist(), ends, counts.tolist(), strict=True)
        ]
        found.append(torch.stack([torch.full_like(pos, layer), pos, feat], 1))
        values.append(acts[pos, feat].detach().float())
        start += len(pos)
    features = torch.cat(found).cpu()
    activations = torch.cat(values)
    outputs = {
        layer: leaf[0] for layer, leaf in run.outputs.items()
    }  # the leaf holds the output less the skip
    writes = node_writes(transcoders, features, activations, acts_of, outputs, run.embed[0], n_layers)
    return Sources(
        features=features,
        decoders=writes.decoders,
        errors=writes.errors,
        tokens=writes.tokens,
        activations=activations.cpu(),
        encoders=torch.cat(encoders).float(),
        runs=runs,
    )
