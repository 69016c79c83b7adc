"""Attribution graphs on the complete replacement model: Lorsa heads in place of attention, transcoders in place
of the MLPs.

The frozen pass of :mod:`.frozen` (every pattern and norm divisor held, each transcoder's write a leaf) runs with
each Lorsa layer's attention output made a leaf as well, holding the model's own value: downstream of it the
model's attention carries nothing, and what moves between positions at that layer is a Lorsa head. A head's
QK pattern is frozen per prompt (computed once from the clean pass's input), so its pre-activation at query
``q`` is linear in the input at every key ``k <= q``::

    z[q, h] = sum_k P[g(h), q, k] * (x[k] . W_V[h] + b_V[h])        (g(h): the head's QK head)

Its read is therefore a cotangent spread over the keys, ``P[g(h), q, k] * W_V[h]`` at each ``k``, injected at
the Lorsa's input hook; its write is its activation times ``W_O[h]`` at its output hook and query position.
A Lorsa error node is what the heads' reconstruction (their writes and ``b_O``) misses of the attention output
at one layer and position. At layers without a Lorsa, the model's attention stays as today's graphs hold it
(pattern frozen, values and outputs live), so :func:`attribute_replacement` with Lorsa at every layer is the
complete replacement model and with Lorsa at some layers a mix of the two.

As in :func:`~interp.circuits.features.direct_effects.attribute`, nothing is attributed at the first position
(its features are left out and its error nodes are zero), every entry ``(target, source)`` of the adjacency is
the direct effect of the source's write on the target's pre-activation (or logit direction) with every other
node's write held, and the graph is built from batched backward passes of one frozen pass.

Nodes, in order (:class:`ReplacementGraph`): transcoder features (layer-major, then position, then feature),
Lorsa features (the same order over ``(layer, position, head)``), transcoder error nodes (``n_layers x pos``),
Lorsa error nodes (``len(lorsa_layers) x pos``), tokens, logits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from interp.circuits.features.attention import _contract
from interp.circuits.features.direct_effects import _check
from interp.circuits.features.frozen import FrozenRun, frozen_run
from interp.circuits.features.node_vectors import Sources, find_sources
from interp.circuits.features.targets import Target, check_targets, select
from interp.dictionary import SparseDictionary, check_fits, written_layers


@dataclass
class ReplacementGraph:
    """The direct effects between the nodes of a prompt on the complete replacement model (plain data).

    Attributes:
        adjacency: ``[n_nodes, n_nodes]``, ``adjacency[target, source]`` (rows of sources and errors are zero).
        features: ``[n_features, 3]`` transcoder features (layer, position, feature); ``activations`` theirs.
        lorsa_features: ``[n_lorsa, 3]`` Lorsa features (layer, position, head); ``lorsa_activations`` theirs.
        lorsa_layers: the model layers whose attention a Lorsa replaces, in the order of their error nodes.
        input_tokens: ``[pos]``; ``logit_tokens``, ``logit_probabilities``, ``logit_labels``: the targets.
    """

    adjacency: torch.Tensor
    features: torch.Tensor
    activations: torch.Tensor
    lorsa_features: torch.Tensor
    lorsa_activations: torch.Tensor
    lorsa_layers: list[int]
    input_tokens: torch.Tensor
    logit_tokens: torch.Tensor
    logit_probabilities: torch.Tensor
    n_layers: int
    logit_labels: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n_pos(self) -> int:
        return len(self.input_tokens)

    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def n_lorsa(self) -> int:
        return len(self.lorsa_features)

    @property
    def error_offset(self) -> int:
        """The first transcoder error node (layer ``l``, position ``p``: ``error_offset + l * n_pos + p``)."""
        return self.n_features + self.n_lorsa

    @property
    def lorsa_error_offset(self) -> int:
        """The first Lorsa error node (the ``i``-th Lorsa layer, position ``p``: ``+ i * n_pos + p``)."""
        return self.error_offset + self.n_layers * self.n_pos

    @property
    def token_offset(self) -> int:
        return self.lorsa_error_offset + len(self.lorsa_layers) * self.n_pos

    @property
    def logit_offset(self) -> int:
        return self.token_offset + self.n_pos


@dataclass
class LorsaSources:
    """The Lorsa side of the frozen pass: live inputs, output leaves, and every Lorsa node's vectors.

    Attributes:
        inputs: layer -> the live input ``[1, pos, d_model]``; ``outputs``: layer -> the leaf at the output hook.
        features: ``[n, 3]`` (layer, position, head); ``activations``: ``[n]``.
        reads: ``[n, pos, d_model]``: each head's read, ``P[g(h), q, k] * W_V[h]`` at key ``k``.
        writes: ``[n, d_model]``: activation times ``W_O[h]``.
        errors: ``[n_lorsa_layers, pos, d_model]`` (zero at position 0).
    """

    inputs: dict[int, torch.Tensor] = field(default_factory=dict)
    outputs: dict[int, torch.Tensor] = field(default_factory=dict)
    features: torch.Tensor | None = None
    activations: torch.Tensor | None = None
    reads: torch.Tensor | None = None
    writes: torch.Tensor | None = None
    errors: torch.Tensor | None = None


def attribute_replacement(
    model: Any,
    transcoders: SparseDictionary,
    lorsa: Any,
    prompt: str | torch.Tensor | Sequence[int],
    *,
    targets: Sequence[str | int | Target] | None = None,
    max_logits: int = 10,
    logit_probability: float = 0.95,
    batch_size: int = 64,
) -> ReplacementGraph:
    """The complete-replacement attribution graph of ``prompt`` (see the module docstring), every active
    feature kept.

    Args:
        model: a :class:`~interp.HookedTransformer`.
        transcoders: a transcoder set or cross-layer transcoder with features at every layer.
        lorsa: a :class:`~interp.sae.lorsa.Lorsa` at some or all layers (its output hooks must not be the
            transcoders').
        prompt, targets, max_logits, logit_probability: as for
            :func:`~interp.circuits.features.direct_effects.attribute`.
        batch_size: reads per backward pass.
    """
    tokens = _check(model, transcoders, prompt, None, batch_size, max_logits, None)
    _check_lorsa(model, transcoders, lorsa)
    if targets is not None:
        check_targets(model, targets)
    was_training = model.training
    model.eval()
    try:
        frozen = replacement_run(model, transcoders, lorsa, tokens)
        chosen = select(model, frozen.run.logits, targets, max_logits, logit_probability)
        adjacency = _adjacency(frozen, chosen, batch_size)
    finally:
        model.train(was_training)
    sources, heads = frozen.sources, frozen.heads
    return ReplacementGraph(
        adjacency=adjacency,
        features=sources.features,
        activations=sources.activations.cpu(),
        lorsa_features=heads.features,
        lorsa_activations=heads.activations.cpu(),
        lorsa_layers=list(lorsa.layers),
        input_tokens=tokens.cpu(),
        logit_tokens=torch.tensor([-1 if t.token is None else t.token for t in chosen]),
        logit_probabilities=torch.tensor([t.weight for t in chosen]),
        n_layers=model.cfg.n_layers,
        logit_labels=tuple(t.label for t in chosen),
    )


def _check_lorsa(model: Any, transcoders: SparseDictionary, lorsa: Any) -> None:
    """Raise one line when ``lorsa`` is not a Lorsa fitting ``model`` beside ``transcoders``."""
    if not getattr(lorsa, "reads_sequences", False) or not hasattr(lorsa, "pattern"):
        raise TypeError(f"lorsa must be an interp.sae.lorsa.Lorsa, got {type(lorsa).__name__}")
    check_fits(model, lorsa)
    taken = {transcoders.output_hook(out) for out in written_layers(transcoders)}
    clash = sorted(taken & {lorsa.output_hook(layer) for layer in lorsa.layers})
    if clash:
        raise ValueError(
            f"the Lorsa and the transcoders both write {clash[0]!r}; a Lorsa replaces attention "
            "(blocks.L.hook_attn_out), the transcoders the MLPs"
        )


def _lorsa_hooks(lorsa: Any, heads: LorsaSources) -> list[tuple[str, Any]]:
    """Hooks keeping each Lorsa layer's live input and making its output hook a leaf of the same value."""

    def record(layer: int) -> Any:
        def keep(x: torch.Tensor, hook: Any) -> None:
            heads.inputs[layer] = x

        return keep

    def leaf(layer: int) -> Any:
        def write(x: torch.Tensor, hook: Any) -> torch.Tensor:
            heads.outputs[layer] = x.detach().requires_grad_(True)
            return heads.outputs[layer]

        return write

    return [(lorsa.input_hook(layer), record(layer)) for layer in lorsa.layers] + [
        (lorsa.output_hook(layer), leaf(layer)) for layer in lorsa.layers
    ]


@torch.no_grad()
def _find_heads(lorsa: Any, heads: LorsaSources) -> None:
    """The active heads after the first position, their reads through the frozen pattern, writes and the
    error nodes, from the frozen pass's inputs and leaves."""
    found, values, reads, writes, errors = [], [], [], [], []
    for layer in lorsa.layers:
        x = heads.inputs[layer].detach()  # [1, pos, d_model]
        acts = lorsa.encode(x, layer)[1][0].clone()  # [pos, head]
        acts[0] = 0
        where = acts.nonzero()  # (position, head), position-major
        pos, head = where[:, 0], where[:, 1]
        pattern = lorsa.pattern(x, layer)[0]  # [qk_head, query, key]
        weights = pattern[lorsa.qk_head(layer, head), pos].float()  # [n, key]
        reads.append(weights[:, :, None] * lorsa.encoder(layer, head).float()[:, None, :])
        value = acts[pos, head].float()
        writes.append(lorsa.decoder(layer, head)[:, 0].float() * value[:, None])
        found.append(torch.stack([torch.full_like(pos, layer), pos, head], 1))
        values.append(value)
        error = heads.outputs[layer][0].float() - lorsa.decode({layer: acts}, layer).float()
        error[0] = 0
        errors.append(error)
    heads.features = torch.cat(found).cpu()
    heads.activations = torch.cat(values)
    heads.reads, heads.writes, heads.errors = torch.cat(reads), torch.cat(writes), torch.stack(errors)


@dataclass
class ReplacementRun:
    """The frozen pass of a prompt on the complete replacement model, and what its nodes read and write.

    Attributes:
        run: the frozen pass (:mod:`.frozen`); ``sources``: the transcoders' nodes; ``heads``: the Lorsa's.
        writes: hook -> ``(positions [m], vectors [m, d_model], columns [m])``: every source node's write.
        leaves: hook -> the leaf at it (token embeddings, transcoder and Lorsa outputs).
        n_sources: the source nodes (features, errors, tokens): the columns of :meth:`effects`.
    """

    run: FrozenRun
    sources: Sources
    heads: LorsaSources
    writes: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    leaves: dict[str, torch.Tensor]
    n_sources: int

    def effects(self, injections: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """``[n, n_sources]``: the direct effect of every source node on ``n`` linear reads of the pass, each
        read given as cotangents ``(tensor, [n, *tensor.shape])`` (one backward pass, batched over the rows)."""
        names = list(self.leaves)
        grads = torch.autograd.grad(
            [t for t, _ in injections],
            [self.leaves[name] for name in names],
            [g for _, g in injections],
            retain_graph=True,
            allow_unused=True,
            is_grads_batched=True,
        )
        out = torch.zeros(len(injections[0][1]), self.n_sources)
        for name, g in zip(names, grads, strict=True):
            if g is not None and name in self.writes:  # else a leaf no read depends on
                _contract(out, g[:, 0].float(), *self.writes[name])
        return out


def replacement_run(
    model: Any, transcoders: SparseDictionary, lorsa: Any, tokens: torch.Tensor
) -> ReplacementRun:
    """The frozen pass of ``tokens [pos]`` with each Lorsa layer's output a leaf, and every node's vectors."""
    heads = LorsaSources()
    with model.hooks(_lorsa_hooks(lorsa, heads)):
        run = frozen_run(model, tokens, transcoders)
    sources = find_sources(run, transcoders, model.cfg.n_layers)
    _find_heads(lorsa, heads)
    n_tc, n_lorsa, n_pos = len(sources.features), len(heads.features), len(tokens)
    leaves = {
        "hook_embed": run.embed,
        **{transcoders.output_hook(out): leaf for out, leaf in run.outputs.items()},
        **{lorsa.output_hook(layer): heads.outputs[layer] for layer in lorsa.layers},
    }
    return ReplacementRun(
        run=run,
        sources=sources,
        heads=heads,
        writes=_writes(sources, heads, transcoders, lorsa),
        leaves=leaves,
        n_sources=n_tc + n_lorsa + (sources.errors.shape[0] + len(lorsa.layers) + 1) * n_pos,
    )


def _adjacency(frozen: ReplacementRun, chosen: list[Target], batch_size: int) -> torch.Tensor:
    """``[n, n]``: the rows of every transcoder feature, Lorsa feature and logit target, by batches of reads."""
    run, sources, heads, n_sources = frozen.run, frozen.sources, frozen.heads, frozen.n_sources
    n_tc, n_lorsa, n_pos = len(sources.features), len(heads.features), sources.tokens.shape[0]
    adjacency = torch.zeros(n_sources + len(chosen), n_sources + len(chosen))
    for batch in torch.arange(n_tc).split(batch_size):
        reads = point_reads(run.inputs, sources.features[batch], sources.encoders[batch])
        adjacency[batch, :n_sources] = frozen.effects(reads)
    for batch in torch.arange(n_lorsa).split(batch_size):
        reads = []
        for layer in heads.features[batch, 0].unique().tolist():
            t = heads.inputs[layer]
            g = torch.zeros(len(batch), *t.shape, dtype=t.dtype, device=t.device)
            mine = (heads.features[batch, 0] == layer).nonzero().flatten()
            g[mine, 0] = heads.reads[batch[mine]].to(t.dtype)
            reads.append((t, g))
        adjacency[batch + n_tc, :n_sources] = frozen.effects(reads)
    vectors = torch.stack([t.vector for t in chosen])
    for batch in torch.arange(len(chosen)).split(batch_size):
        at = torch.tensor([[-1, n_pos - 1, 0]]).expand(len(batch), 3)
        reads = point_reads({-1: run.unembed_in}, at, vectors[batch])
        adjacency[batch + n_sources, :n_sources] = frozen.effects(reads)
    return adjacency


def point_reads(
    inputs: dict[int, torch.Tensor], at: torch.Tensor, vectors: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One cotangent per read, ``vectors[i]`` at ``inputs[at[i, 0]]`` position ``at[i, 1]``: ``(tensor,
    [n, 1, pos, d_model])`` for each tensor read."""
    found = []
    for layer in at[:, 0].unique().tolist():
        t = inputs[layer]
        g = torch.zeros(len(at), *t.shape, dtype=t.dtype, device=t.device)
        mine = (at[:, 0] == layer).nonzero().flatten()
        g[mine, 0, at[mine, 1]] = vectors[mine].to(t.device, t.dtype)
        found.append((t, g))
    return found


def _writes(
    sources: Sources, heads: LorsaSources, transcoders: SparseDictionary, lorsa: Any
) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Every source node's write, by hook: ``(positions [m], vectors [m, d_model], columns [m])``: the
    transcoders' nodes as :meth:`~.node_vectors.NodeWrites.by_hook` gives them, renumbered around the Lorsa's."""
    n_tc, n_lorsa, (n_layers, n_pos, _) = len(sources.features), len(heads.features), sources.errors.shape
    lorsa_errors = n_tc + n_lorsa + n_layers * n_pos
    tokens = lorsa_errors + len(lorsa.layers) * n_pos

    def renumbered(columns: torch.Tensor) -> torch.Tensor:
        shift = torch.where(columns >= n_tc + n_layers * n_pos, tokens - n_tc - n_layers * n_pos, n_lorsa)
        return torch.where(columns < n_tc, columns, columns + shift)

    found = {
        name: (positions, vectors, renumbered(columns))
        for name, (positions, vectors, columns) in sources.by_hook(transcoders).items()
    }
    positions = torch.arange(n_pos)
    for i, layer in enumerate(lorsa.layers):
        mine = (heads.features[:, 0] == layer).nonzero().flatten()
        found[lorsa.output_hook(layer)] = (
            torch.cat([heads.features[mine, 1], positions]),
            torch.cat([heads.writes[mine.to(heads.writes.device)], heads.errors[i]]).float(),
            torch.cat([n_tc + mine, lorsa_errors + i * n_pos + positions]),
        )
    return found
