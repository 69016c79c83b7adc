"""Head loadings: an edge of an attribution graph split exactly into the attention heads it passes through.

An edge ``A[t, s]`` sums the paths from the source's write to the target's read in the model whose patterns,
norm divisors and MLP writes are held at the prompt's values (the held model, :mod:`.held`: the same linear map
the frozen pass differentiates). Group the paths by the *last* attention head they pass through: the paths
through none (the stream and skip connections only) give ``direct``, and those whose last hop is head
``(l, h)`` give ``heads[l, h]``. The share of a head is the direct (attention-free) derivative of the target's
read with respect to that head's write (``hook_result``), contracted with the head's whole change of write when
the source is added (which counts every earlier hop). The shares sum to the edge exactly: the target reads the
stream, and in the held model the only writes that change are the source's own, the skip connections' and the
heads'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.analysis.node import Node
from interp.analysis.qk.matrix import top_entries
from interp.circuits.features.held import Held
from interp.circuits.features.node_vectors import held_node_writes
from interp.dictionary import SparseDictionary


@dataclass(frozen=True)
class HeadLoadings:
    """``edge = direct + heads.sum()``; ``heads`` is ``[n_layers, n_heads]``."""

    edge: float
    direct: float
    heads: torch.Tensor

    @property
    def total(self) -> float:
        return self.direct + float(self.heads.sum())

    def top(self, n: int) -> list[tuple[int, int, float]]:
        """``(layer, head, loading)`` of the ``n`` heads with the largest absolute loadings, largest first;
        heads whose loading is zero are left out."""
        return [(layer, head, v) for layer, head, v in top_entries(self.heads, n) if v != 0.0]


def head_loadings(
    model: Any, transcoders: SparseDictionary, graph: Any, target: str, source: str
) -> HeadLoadings:
    """The loadings of edge ``source -> target`` of ``graph`` (see the module docstring)."""
    return edges_head_loadings(model, transcoders, graph, [(target, source)])[0]


def edges_head_loadings(
    model: Any, transcoders: SparseDictionary, graph: Any, edges: Sequence[tuple[str, str]]
) -> list[HeadLoadings]:
    """The loadings of each ``(target, source)`` edge: one clean run, one forward pass with a batch row per
    source, and one forward and batched backward pass for every target at once."""
    tc, tokens = transcoders, graph.input_tokens.to(model.embed.W_E.device)
    parsed = [(Node.parse(t), Node.parse(s)) for t, s in edges]
    for t, s in parsed:
        if t.kind not in ("feature", "logit") or s.kind not in ("feature", "error", "token"):
            raise ValueError(
                f"an edge runs from a feature, error or token to a feature or logit; got {s} -> {t}"
            )
        graph.edge(t, s)  # the graph has both nodes
        if t.kind == "logit" and int(graph.logit_tokens[t.target]) < 0:
            raise ValueError("head loadings of a custom-direction target need its token; give a token target")
    held = Held.run(model, tc, tokens)
    results = [f"blocks.{layer}.attn.hook_result" for layer in range(model.cfg.n_layers)]
    sources = list(dict.fromkeys(s for _, s in parsed))
    targets = list(dict.fromkeys(t for t, _ in parsed))
    writes = held_node_writes(graph, tc, held.clean)
    pushes = [writes.of(graph.index(s), tc) for s in sources]
    with torch.no_grad():
        moved = _pushed(model, tc, tokens, held, pushes, record=results)
    grads = _direct_gradients(model, tc, tokens, held, results, graph, targets)
    out = []
    for t, s in parsed:
        row, g = sources.index(s) + 1, grads[targets.index(t)]
        change = {name: moved[name][row] - moved[name][0] for name in results}  # [pos, head, d_model]
        heads = torch.stack([(g[name] * change[name]).sum((0, 2)) for name in results]).float()
        direct = sum(float((g[name][pos] * vec).sum()) for name, pos, vec in pushes[row - 1])
        out.append(HeadLoadings(edge=graph.edge(t, s), direct=direct, heads=heads.cpu()))
    return out


def _pushed(model, tc, tokens, held, pushes, record):
    """Rows held at the clean run: the first as it is, row ``i + 1`` with ``pushes[i]``'s vectors added where
    that source writes; returns ``record``'s tensors ``[rows, ...]``."""
    kept: dict[str, torch.Tensor] = {}
    add: dict[str, torch.Tensor] = {}
    rows = len(pushes) + 1
    for i, writes in enumerate(pushes):
        for name, pos, vec in writes:
            add.setdefault(name, torch.zeros(rows, len(tokens), model.cfg.d_model, device=vec.device))
            add[name][i + 1, pos] += vec

    def push(x: torch.Tensor, hook: Any) -> torch.Tensor:
        return x + add[hook.name].to(x.dtype)

    def keep(x: torch.Tensor, hook: Any) -> None:
        kept[hook.name] = x.detach()

    hooks = [*held.hooks(tc), *((name, push) for name in add), *((name, keep) for name in record)]
    model.run_with_hooks(tokens[None].expand(rows, -1), fwd_hooks=hooks)
    return kept


def _direct_gradients(model, tc, tokens, held, results, graph, targets):
    """Per target, the gradient of its read with respect to every head's write and every write site, with
    every attention path blocked (``hook_z`` detached): the attention-free part of the held model. One
    forward pass; the reads' backward passes run batched."""
    seen = held.seen
    leaves: dict[str, torch.Tensor] = {}

    def leaf(x: torch.Tensor, hook: Any) -> torch.Tensor:
        leaves[hook.name] = x.detach().requires_grad_(True)
        return leaves[hook.name]

    def block(x: torch.Tensor, hook: Any) -> torch.Tensor:
        return x.detach()

    def unembed_in(x: torch.Tensor, hook: Any) -> None:
        seen["unembed.hook_in"] = x

    held_hooks = held.hooks(tc, leaves)
    writes = [(n, leaf) for n in (*results, "hook_embed")]
    z = [(f"blocks.{layer}.attn.hook_z", block) for layer in range(model.cfg.n_layers)]
    with torch.enable_grad(), model.hooks([*held_hooks, *writes, *z, ("unembed.hook_in", unembed_in)]):
        model(tokens[None])
        reads = []
        for t in targets:
            if t.kind == "logit":
                w_u = model.unembed.weight.float()
                direction = w_u[:, int(graph.logit_tokens[t.target])] - w_u.mean(1)
                reads.append(seen["unembed.hook_in"][0, -1].float() @ direction)
            else:
                x = seen[tc.input_hook(t.layer)][0, t.position]
                reads.append(tc.encode(x[None], t.layer)[0][0, t.feature])
        names = list(leaves)
        reads = torch.stack(reads)  # [targets]
        grads = torch.autograd.grad(
            reads,
            [leaves[n] for n in names],
            torch.eye(len(reads), dtype=reads.dtype, device=reads.device),
            allow_unused=True,
            is_grads_batched=True,
        )
    return [
        {
            n: (torch.zeros_like(leaves[n][0]) if g is None else g[i, 0]).float()
            for n, g in zip(names, grads, strict=True)
        }
        for i in range(len(targets))
    ]
