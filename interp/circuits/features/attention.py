"""Attention explained in the graph's own nodes: which heads carry an edge, and why each attends there.

An attribution graph freezes attention: an edge between positions runs through heads whose patterns are held
at the prompt's values. :func:`~interp.circuits.features.heads.head_loadings` splits such an edge into those
heads; this module then asks why each of the top heads attends from the edge's target position (the query) to
its source position (the key).

In the held model (:mod:`.held`: patterns and every norm's divisor held at the prompt's values, the MLPs'
writes replaced by the graph's feature and error writes) a head's query ``q`` at one position and key ``k`` at
another (after any q/k norm and rotary) are affine in the writes of the graph's nodes: each feature's
activation times its decoder rows, each error vector, each token embedding. So ``q = sum_n q_n + q_bias`` over
the nodes ``n`` of the graph (at the query's position and, through earlier heads, at any position it reads),
where ``q_n`` is node ``n``'s write pushed through the held model to the query, and ``q_bias`` is what no node
writes: biases, position embeddings, the transcoders' decoder biases, the first position's MLP writes
(attributed to nothing, as in circuit-tracer) and active features the graph left out. The score
``q . k * scale`` is then the sum of the query-node x key-node matrix ``q_n . k_m * scale``, exactly. For two
keys the query parts are the same, so the difference of the two scores is ``q_n . (k_m - k'_m) * scale`` over
the graph's nodes.

The parts come from batched backward passes: one row per query (key) dimension of each head asked for, the
gradient contracted with each node's write where it writes, as
:func:`~interp.circuits.features.direct_effects.attribute` does for the graph's own rows. The graph is not
recomputed; one forward pass of the prompt serves every head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.analysis.node import Node
from interp.analysis.qk.difference import QKDifference
from interp.analysis.qk.matrix import QKScore
from interp.circuits.features.heads import HeadLoadings, edges_head_loadings
from interp.circuits.features.held import Held
from interp.circuits.features.node_vectors import held_node_writes
from interp.dictionary import SparseDictionary

BIAS = Node.rest()  # the row and column of what no node of the graph writes ("bias" in graph files)


@dataclass(frozen=True, kw_only=True)
class HeadScore(QKScore):
    """One head's score from ``query`` to ``key``, split into the graph's nodes on both sides: a
    :class:`~interp.analysis.qk.matrix.QKScore` whose parts are the graph's nodes whose parts are not zero,
    then :data:`BIAS` (``query_parts``, ``key_parts``: ``[n, d_head]`` each node's part of ``q`` and ``k``,
    float32 values held in float64).

    Attributes:
        layer, head: the head (``head`` counts query heads; the key side is its key/value head).
        query, key: the positions.
        loading: the head's share of the edge explained (:class:`HeadLoadings`), ``nan`` when asked directly.
        score: ``q . k * scale`` before any soft-cap; equals ``matrix.sum()``.
        pattern: the attention weight the prompt's run gave ``key`` from ``query``.
    """

    layer: int
    head: int
    query: int
    key: int
    loading: float
    score: float
    pattern: float


@dataclass(frozen=True)
class AttentionExplanation:
    """An edge ``source -> target`` explained: its head loadings and, for the top heads, their scores from the
    target's position to the source's in graph nodes (and against ``other_key``, when asked)."""

    target: str
    source: str
    loadings: HeadLoadings
    heads: tuple[HeadScore, ...]
    differences: tuple[QKDifference, ...] = ()

    def __repr__(self) -> str:
        shown = ", ".join(f"L{h.layer}H{h.head} {h.loading:+.3g}" for h in self.heads)
        return f"AttentionExplanation({self.source} -> {self.target}: edge {self.loadings.edge:.4g}; {shown})"


def edge_positions(graph: Any, target: str, source: str) -> tuple[int, int]:
    """``(query, key)``: the target's position (a logit's is the last) and the source's."""
    t, s = Node.parse(target), Node.parse(source)
    query = graph.n_pos - 1 if t.kind == "logit" else t.position
    return query, s.position


def strongest_input(graph: Any, node: str) -> str:
    """The source of ``node``'s strongest input edge from another position (edges between positions can only
    pass through attention)."""
    t = Node.parse(node)
    row = graph.adjacency[graph.index(t)].abs()
    query = graph.n_pos - 1 if t.kind == "logit" else t.position
    other = torch.tensor([n.kind != "logit" and n.position != query for n in graph.nodes])
    row = torch.where(other, row, torch.zeros_like(row))
    if not bool(row.any()):
        raise ValueError(f"{node} has no input edge from another position; no attention carries into it")
    return str(graph.nodes[int(row.argmax())])


def attention_edges(graph: Any, n: int, node_threshold: float = 0.8, edge_threshold: float = 0.98) -> list:
    """The ``n`` strongest edges of the pruned graph between positions, as ``(target, source)`` names."""
    from interp.circuits.features.neuronpedia import pruned_parts

    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"the number of attention edges must be a non-negative integer, got {n!r}")
    _, edges = pruned_parts(graph, node_threshold, edge_threshold)
    found = []
    for t, s, _ in sorted(edges, key=lambda e: -abs(e[2])):
        query, key = edge_positions(graph, graph.nodes[t], graph.nodes[s])
        if query != key:
            found.append((str(graph.nodes[t]), str(graph.nodes[s])))
        if len(found) == n:
            break
    return found


def explain_edges(
    model: Any,
    transcoders: SparseDictionary,
    graph: Any,
    edges: Sequence[tuple[str, str]],
    *,
    top_heads: int = 3,
    other_key: int | None = None,
    batch_size: int = 256,
) -> list[AttentionExplanation]:
    """Explain each ``(target, source)`` edge of ``graph`` (see the module docstring); one forward pass of the
    prompt and batched backward passes serve every head of every edge.

    Args:
        top_heads: the heads with the largest absolute loadings, per edge (heads with a zero loading are left
            out).
        other_key: a second key position: each head's score there too, and the difference.
        batch_size: backward rows per pass.
    """
    if isinstance(top_heads, bool) or not isinstance(top_heads, int) or top_heads < 1:
        raise ValueError(f"top_heads must be a positive integer, got {top_heads!r}")
    if other_key is not None and not 0 <= other_key < graph.n_pos:
        raise ValueError(f"other_key must be a position of the prompt, 0..{graph.n_pos - 1}; got {other_key}")
    chosen = []
    for target, source in edges:
        t, s = Node.parse(target), Node.parse(source)
        graph.index(t), graph.index(s)  # refuse nodes the graph lacks before any work
        query, key = edge_positions(graph, t, s)
        if query == key:
            raise ValueError(f"{s} -> {t} stays at position {query}; explain an edge between two positions")
        if other_key is not None and other_key == key:
            raise ValueError(f"other_key {other_key} is the edge's own key; choose another position")
        if model.cfg.causal and other_key is not None and other_key > query:
            raise ValueError(f"other_key {other_key} comes after the query {query}; the model is causal")
        chosen.append((str(t), str(s), query, key))
    loadings = (
        edges_head_loadings(model, transcoders, graph, [(t, s) for t, s, _, _ in chosen]) if chosen else []
    )
    for i, (loads, (t, s, query, key)) in enumerate(zip(loadings, chosen, strict=True)):
        chosen[i] = (t, s, query, key, loads, [(layer, head) for layer, head, _ in loads.top(top_heads)])
    wanted = {}
    for _, _, query, key, _, heads in chosen:
        for layer, head in heads:
            for k in (key,) if other_key is None else (key, other_key):
                wanted[(layer, head, query, k)] = None
    scores = head_scores(model, transcoders, graph, list(wanted), batch_size=batch_size)
    out = []
    for target, source, query, key, loads, heads in chosen:
        found = [_with_loading(scores[(lay, h, query, key)], float(loads.heads[lay, h])) for lay, h in heads]
        diffs = ()
        if other_key is not None:
            diffs = tuple(key_difference(f, scores[(f.layer, f.head, query, other_key)]) for f in found)
        out.append(AttentionExplanation(target, source, loads, tuple(found), diffs))
    return out


def _with_loading(score: HeadScore, loading: float) -> HeadScore:
    from dataclasses import replace

    return replace(score, loading=loading)


def key_difference(first: HeadScore, second: HeadScore) -> QKDifference:
    """``first - second`` of one head and query at two keys, over the union of the two keys' nodes (a node one
    key lacks counts as zero there); the query's nodes are the same on both sides."""
    if (first.layer, first.head, first.query) != (second.layer, second.head, second.query):
        raise ValueError("a key difference compares one head and query at two keys")
    keys = tuple(dict.fromkeys([*first.key_components, *second.key_components]))
    index = {n: i for i, n in enumerate(keys)}
    queries = tuple(range(len(first.query_components)))
    return QKDifference(
        query_components=first.query_components,
        key_components=keys,
        first=first,
        second=second,
        rows=(queries, queries),
        columns=tuple(tuple(index[n] for n in side.key_components) for side in (first, second)),  # type: ignore[arg-type]
    )


def head_scores(
    model: Any,
    transcoders: SparseDictionary,
    graph: Any,
    cases: Sequence[tuple[int, int, int, int]],
    *,
    batch_size: int = 256,
) -> dict[tuple[int, int, int, int], HeadScore]:
    """``(layer, head, query, key) -> HeadScore`` for each case, in the graph's nodes (module docstring)."""
    cfg = model.cfg
    if not cases:
        return {}
    for layer, head, query, key in cases:
        if not (0 <= layer < cfg.n_layers and 0 <= head < cfg.n_heads):
            raise ValueError(
                f"head L{layer}H{head} is not in a model of {cfg.n_layers} x {cfg.n_heads} heads"
            )
        if not (0 <= query < graph.n_pos and 0 <= key < graph.n_pos):
            raise ValueError(f"positions ({query}, {key}) are not in a prompt of {graph.n_pos} tokens")
        if cfg.qk_norm != "none" and not model.blocks[layer].attn.rotary:
            raise ValueError(
                "explaining attention needs rotary after a q/k norm (no hook holds the normed q)"
            )
    # each side's request: (side, layer, head or key/value head, position)
    sides = {}
    for layer, head, query, key in cases:
        sides[("q", layer, head, query)] = None
        sides[("k", layer, head // cfg.group_size, key)] = None
    requests = list(sides)
    tokens = graph.input_tokens.to(model.embed.W_E.device)
    held = Held.run(model, transcoders, tokens)
    writes = held_node_writes(graph, transcoders, held.clean).by_hook(transcoders)
    parts, totals = _parts(model, transcoders, tokens, held, writes, requests, batch_size)
    patterns = {
        layer: held.clean[f"blocks.{layer}.attn.hook_pattern"][0] for layer in {c[0] for c in cases}
    }  # [head, query, key]
    out = {}
    for layer, head, query, key in cases:
        qn, qp = _with_bias(graph, parts[("q", layer, head, query)], totals[("q", layer, head, query)])
        g = head // cfg.group_size
        kn, kp = _with_bias(graph, parts[("k", layer, g, key)], totals[("k", layer, g, key)])
        scale = float(model.blocks[layer].attn.scale)
        score = float(
            (totals[("q", layer, head, query)].double() @ totals[("k", layer, g, key)].double()) * scale
        )
        out[(layer, head, query, key)] = HeadScore(
            layer=layer,
            head=head,
            query=query,
            key=key,
            loading=float("nan"),
            score=score,
            pattern=float(patterns[layer][head, query, key]),
            scale=scale,
            query_components=qn,
            key_components=kn,
            query_parts=qp,
            key_parts=kp,
        )
    return out


def _with_bias(graph: Any, parts: torch.Tensor, total: torch.Tensor) -> tuple[tuple[Node, ...], torch.Tensor]:
    """The nodes with a part that is not zero, then the bias (the total less every node's part); the parts in
    float64 (float32 values)."""
    keep = parts.abs().sum(1).nonzero().flatten()
    bias = total.double() - parts.double().sum(0)
    nodes = tuple(graph.nodes[i] for i in keep.tolist()) + (BIAS,)
    return nodes, torch.cat([parts[keep], bias.float()[None]]).double()


def _side_hook(model: Any, side: str, layer: int) -> str:
    """The hook holding a head's query (key) as the score reads it: after rotary, or the projection itself."""
    rotary = model.blocks[layer].attn.rotary
    return f"blocks.{layer}.attn.hook_{'rot_' if rotary else ''}{side}"


def _parts(
    model: Any,
    transcoders: SparseDictionary,
    tokens: torch.Tensor,
    held: Held,
    writes: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    requests: list[tuple[str, int, int, int]],
    batch_size: int,
) -> tuple[dict, dict]:
    """Per request ``(side, layer, head, position)``: ``[n_nodes, d_head]`` each node's part, and the total;
    ``writes``: every node's writes by hook (:meth:`~interp.circuits.features.node_vectors.NodeWrites.by_hook`)."""
    leaves: dict[str, torch.Tensor] = {}
    seen: dict[str, torch.Tensor] = {}

    def embed_leaf(x: torch.Tensor, hook: Any) -> torch.Tensor:
        leaves[hook.name] = x.detach().requires_grad_(True)
        return leaves[hook.name]

    def keep(x: torch.Tensor, hook: Any) -> None:
        seen[hook.name] = x

    names = list(dict.fromkeys(_side_hook(model, side, layer) for side, layer, _, _ in requests))
    last = max(layer for _, layer, _, _ in requests)
    hooks = [*held.hooks(transcoders, leaves), ("hook_embed", embed_leaf), *((n, keep) for n in names)]
    with torch.enable_grad(), model.hooks(hooks):
        model(tokens[None], stop_at_layer=last + 1)
        leaf_names = [n for n in writes if n in leaves]
        n_nodes = 1 + max(int(cols.max()) for _, _, cols in writes.values())
        d_head = model.cfg.d_head
        rows = [(r, e) for r in requests for e in range(d_head)]  # one backward row per dimension
        parts = torch.zeros(len(rows), n_nodes)
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            outputs = list(dict.fromkeys(_side_hook(model, r[0], r[1]) for r, _ in chunk))
            cotangents = {n: torch.zeros(len(chunk), *seen[n].shape, dtype=seen[n].dtype) for n in outputs}
            for i, ((side, layer, head, pos), e) in enumerate(chunk):
                cotangents[_side_hook(model, side, layer)][i, 0, pos, head, e] = 1
            grads = torch.autograd.grad(
                [seen[n] for n in outputs],
                [leaves[n] for n in leaf_names],
                [cotangents[n].to(seen[n].device) for n in outputs],
                retain_graph=True,
                allow_unused=True,
                is_grads_batched=True,
            )
            block = parts[start : start + len(chunk)]
            for name, g in zip(leaf_names, grads, strict=True):
                if g is not None:
                    _contract(block, g[:, 0].float(), *writes[name])
    totals, out = {}, {}
    for i, request in enumerate(requests):
        side, layer, head, pos = request
        out[request] = parts[i * d_head : (i + 1) * d_head].T.contiguous()  # [n_nodes, d_head]
        totals[request] = seen[_side_hook(model, side, layer)][0, pos, head].detach().float().cpu()
    return out, totals


def _contract(
    block: torch.Tensor,
    grad: torch.Tensor,
    positions: torch.Tensor,
    vectors: torch.Tensor,
    columns: torch.Tensor,
) -> None:
    """``block[:, column] += grad[:, position] . vector`` for each write, one matrix product per position."""
    vectors = vectors.to(grad.device)
    for pos in positions.unique().tolist():
        at = (positions == pos).nonzero().flatten()
        block[:, columns[at]] += (grad[:, pos] @ vectors[at].T).cpu()  # [rows, writes at pos]
