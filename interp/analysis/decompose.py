"""The residual stream as a sum of what each component wrote into it: the one walk over the stream.

The stream entering block ``L`` of a pre-norm model is exactly ``embed + pos_embed + sum over earlier layers
of (each head's result + the attention output bias + the MLP output)``. Post-norm models (BERT) apply a norm
after every residual add; with each norm's scale frozen at the value the run produced (``hook_scale``), the
norm is affine, so every earlier part is centred, divided by that scale and multiplied by the gain, and the
norm's bias joins as a component of its own (``L{l}_ln1_bias``, ``embed_ln_bias``). Models that norm each
attention sublayer's output before the add (Gemma 2/3, OLMo 2) are linearised the same way: every head's
result goes through ``ln1_post`` with its cached scale. Either way the parts add up exactly to the cached
stream. Parts are returned in float32.

:func:`decompose_stream` is the walk, and names each part with a :class:`~interp.analysis.node.Node`; it
serves :func:`decompose_resid` (the whole stream, with labels) and QK attribution, which takes the stream at one
position and goes further where a question about attention needs it: a head's write at position ``p`` is
itself a sum over the keys that head read, ``pattern[h, p, s] * v[s, g(h)] @ W_O[h]``, so with
``heads="source"`` each head contributes one part per source position ``s``; with transcoders, an MLP's write
is split into each active feature's decoder write, the decoder bias, the skip term and the error (the MLP's
output minus all of these), which add up to the MLP's write exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import MissingHooksError, check_index, check_layer
from interp.analysis.feature_writes import check_transcoders, feature_names, feature_writes
from interp.analysis.node import Node
from interp.analysis.norms import linearise_norm
from interp.dictionary import SparseDictionary, written_layers

Where = Literal["pre", "mid", "post"]
Heads = Literal["result", "z", "source"]
_HEAD_HOOKS = {"result": ("hook_result",), "z": ("hook_z",), "source": ("hook_pattern", "hook_v")}


def _extent(model: nn.Module, layer: int, where: str) -> tuple[int, int]:
    """How many attention and MLP sublayers have written into ``blocks.{layer}.hook_resid_{where}``."""
    if where not in ("pre", "mid", "post"):
        raise ValueError(f"where={where!r}; expected 'pre', 'mid' or 'post'")
    if where == "mid" and model.cfg.parallel_attn_mlp:
        raise ValueError("parallel blocks have no resid_mid; decompose where='pre' or 'post'")
    layer = check_layer(model, layer, allow_end=where == "pre")
    return {"pre": (layer, layer), "mid": (layer + 1, layer), "post": (layer + 1, layer + 1)}[where]


def decompose_names(
    model: nn.Module, layer: int, where: Where = "pre", *, heads: Heads = "result"
) -> list[str]:
    """The hooks :func:`decompose_resid` (:func:`decompose_stream`) needs, as ``names_filter``.

    ``heads`` says how the heads' writes are read: ``"result"`` from ``hook_result``, ``"z"`` as
    ``hook_z @ W_O``, ``"source"`` by key position from ``hook_pattern`` and ``hook_v``.

    >>> from interp import HookedTransformer, TransformerConfig
    >>> model = HookedTransformer(TransformerConfig(n_layers=2, d_model=8, n_heads=2, d_vocab=10, n_ctx=4))
    >>> decompose_names(model, 1, "pre")
    ['hook_embed', 'hook_pos_embed', 'blocks.0.attn.hook_result', 'blocks.0.hook_mlp_out']
    """
    if heads not in _HEAD_HOOKS:
        raise ValueError(f"heads={heads!r}; expected one of {list(_HEAD_HOOKS)}")
    n_attn, n_mlp = _extent(model, layer, where)
    post = model.cfg.norm_placement == "post"
    names = ["hook_embed"] + (["hook_pos_embed"] if "hook_pos_embed" in model.hook_dict else [])
    names += ["embed_ln.hook_scale"] if model.cfg.embed_norm else []
    for l in range(n_attn):
        names += [f"blocks.{l}.attn.{hook}" for hook in _HEAD_HOOKS[heads]]
        names += [f"blocks.{l}.ln1_post.hook_scale"] if model.blocks[l].ln1_post is not None else []
        names += [f"blocks.{l}.ln1.hook_scale"] if post else []
        if l < n_mlp:
            names += [f"blocks.{l}.hook_mlp_out"] + ([f"blocks.{l}.ln2.hook_scale"] if post else [])
    return names


@dataclass
class _Parts:
    """Nodes and their parts ``[..., d_model]`` (float32), grown in forward order; a node added again (a
    cross-layer feature writing to several layers) adds to its part."""

    nodes: list[Node] = field(default_factory=list)
    vectors: list[torch.Tensor] = field(default_factory=list)
    index: dict[Node, int] = field(default_factory=dict)

    def add(self, node: Node, vector: torch.Tensor) -> None:
        vector = vector.detach()
        if self.vectors:  # a bias [d_model] is the same at every position: expanded to the parts' shape
            like = self.vectors[0]
            vector = vector.to(like.device, torch.float32).expand_as(like)
        if node in self.index:
            i = self.index[node]
            self.vectors[i] = self.vectors[i] + vector.float()
            return
        self.index[node] = len(self.nodes)
        self.nodes.append(node)
        self.vectors.append(vector.float())

    def through(self, model: nn.Module, norm: nn.Module, scale: torch.Tensor, start: int, bias: Node) -> None:
        """Every part from ``start`` on through ``norm`` with its scale frozen; its bias joins as a part."""
        if len(self.vectors) > start:
            stacked = torch.stack(self.vectors[start:])  # [n, ..., d_model]
            self.vectors[start:] = list(linearise_norm(model, norm, scale, stacked).unbind(0))
        if norm.b is not None:
            self.add(bias, norm.b)


@torch.no_grad()
def decompose_stream(
    model: nn.Module,
    cache: ActivationCache,
    layer: int,
    where: Where = "pre",
    *,
    position: int | None = None,
    heads: Heads = "result",
    transcoders: SparseDictionary | None = None,
    tokens: list[str] | None = None,
) -> tuple[list[Node], torch.Tensor]:
    """Split ``blocks.{layer}.hook_resid_{where}`` into the writes of every component before it.

    Args:
        model: the model that produced ``cache``.
        cache: holds :func:`decompose_names` ``(model, layer, where, heads=heads)`` (with ``"result"``,
            ``hook_z`` may stand in for ``hook_result``), and the transcoders' input hooks where they are given.
        layer: block index; with ``where="pre"``, ``n_layers`` means the final stream.
        where: ``"pre"``, ``"mid"`` or ``"post"``.
        position: split the stream of batch row 0 at this position only (QK attribution reads one prompt);
            ``None``: every row and position.
        heads: how head writes are read (:func:`decompose_names`); ``"source"`` splits each head's write by
            the key position it read, one part per key (needs ``position``).
        transcoders: split each MLP they replace into feature writes, decoder bias, skip and error (needs
            ``position``, and the transcoders' input hooks in ``cache``: :func:`feature_names`).
        tokens: the prompt's token strings, which the nodes' labels show.

    Returns:
        ``(nodes, parts)``: one :class:`~interp.analysis.node.Node` per part, and ``parts`` float32
        ``[component, batch, pos, d_model]`` (``[component, d_model]`` at a ``position``) with ``parts.sum(0)``
        equal to the stream.

    Raises:
        MissingHooksError: the cache lacks a needed hook (the message names them all).
        ValueError: ``heads="source"`` or transcoders without a position; transcoders of another model, or
            ones that do not write the MLPs' outputs.
    """
    if position is None and (heads == "source" or transcoders is not None):
        raise ValueError(
            "splitting heads by source (heads='source') or MLPs into transcoder features needs one position; "
            "pass position="
        )
    if transcoders is not None:
        check_transcoders(model, transcoders)
    _check(model, cache, layer, where, heads, "decompose_stream", transcoders)
    if position is not None:
        n_pos = cache["hook_embed"].shape[1]
        position = check_index(position, n_pos, "position", f"a sequence of {n_pos} tokens")
    return _walk(model, cache, layer, where, position, heads, transcoders, tokens)


def _check(
    model: nn.Module,
    cache: ActivationCache,
    layer: int,
    where: str,
    heads: Heads,
    caller: str,
    transcoders: SparseDictionary | None = None,
) -> None:
    """Raise :class:`MissingHooksError` naming every hook the walk needs that ``cache`` lacks (``hook_z`` may
    stand in for ``hook_result``)."""
    names = decompose_names(model, layer, where, heads=heads)
    if transcoders is not None:
        names += feature_names(transcoders, _extent(model, layer, where)[1])
    missing = [n for n in names if n not in cache]
    missing = [n for n in missing if not (n.endswith("hook_result") and n.replace("result", "z") in cache)]
    if missing:
        also = "" if heads == "result" else f", heads={heads!r}"
        raise MissingHooksError(
            f"{caller}(layer={layer}, where={where!r}{also}) needs hooks that are not in this cache: "
            f"{missing}; run model.run_with_cache(tokens, "
            f"names_filter=decompose_names(model, {layer}, {where!r}{also}))"
        )


def _walk(
    model: nn.Module,
    cache: ActivationCache,
    layer: int,
    where: Where,
    position: int | None,
    heads: Heads,
    transcoders: SparseDictionary | None,
    tokens: list[str] | None,
) -> tuple[list[Node], torch.Tensor]:
    """The walk of :func:`decompose_stream`, its arguments checked."""
    n_attn, n_mlp = _extent(model, layer, where)
    cfg = model.cfg
    at = (slice(None),) if position is None else (0, position)  # into [batch, pos, ...]
    shown = tokens[position] if tokens is not None and position is not None else ""
    parts = _Parts()
    parts.add(Node.token(position, shown=shown), cache["hook_embed"][at])
    if "hook_pos_embed" in model.hook_dict:
        parts.add(Node.pos_embed(position, shown=shown), cache["hook_pos_embed"][at])
    if cfg.embed_norm:
        parts.through(model, model.embed_ln, cache["embed_ln.hook_scale"][at], 0, Node.bias("embed_ln.b"))
    for l in range(n_attn):
        block = model.blocks[l]
        start = len(parts.nodes)
        for node, write in _head_writes(model, cache, l, position, heads, tokens):
            parts.add(node, write)
        if block.attn.b_O is not None:
            parts.add(Node.attn_bias(l), block.attn.b_O)
        if block.ln1_post is not None:  # the attention output is normed before the add
            scale = cache[f"blocks.{l}.ln1_post.hook_scale"][at]
            parts.through(model, block.ln1_post, scale, start, Node.bias("ln1_post.b", l))
        if cfg.norm_placement == "post":
            scale = cache[f"blocks.{l}.ln1.hook_scale"][at]
            parts.through(model, block.ln1, scale, 0, Node.bias("ln1.b", l))
        if l < n_mlp:
            _mlp_parts(cache, l, position, shown, parts, transcoders)
            if cfg.norm_placement == "post":
                scale = cache[f"blocks.{l}.ln2.hook_scale"][at]
                parts.through(model, block.ln2, scale, 0, Node.bias("ln2.b", l))
    return parts.nodes, torch.stack(parts.vectors)  # [component, ..., d_model]


def _head_writes(
    model: nn.Module,
    cache: ActivationCache,
    l: int,
    position: int | None,
    heads: Heads,
    tokens: list[str] | None,
) -> Iterator[tuple[Node, torch.Tensor]]:
    """Layer ``l``'s head writes without ``b_O`` (at ``position`` of row 0, or ``[batch, pos, d_model]``)."""
    if heads == "source":
        w_o = model.blocks[l].attn.W_O.detach().float()  # [head, d_head, d_model]
        pattern = cache[f"blocks.{l}.attn.hook_pattern"][0, :, position].float()  # [head, key]
        head, source = pattern.nonzero(as_tuple=True)  # the keys each head read
        v = cache[f"blocks.{l}.attn.hook_v"][0].float()  # [key, kv_head, d_head]
        v = v.repeat_interleave(model.cfg.group_size, dim=1)  # [key, head, d_head]
        vo = torch.einsum("she,hed->hsd", v, w_o.to(v.device))  # [head, key, d_model]
        writes = pattern[head, source, None] * vo[head, source]  # [n, d_model]
        for h, s, write in zip(head.tolist(), source.tolist(), writes.unbind(0), strict=True):
            yield Node.head_node(l, h, position, s, shown=tokens[s] if tokens is not None else ""), write
        return
    at = (slice(None),) if position is None else (0, position)
    # hook_result as the model computes it (in its dtype), or hook_z projected in float32
    results = head_results(model, cache, l, at, z_only=heads == "z")  # [..., head, d_model]
    for h, write in enumerate(results.unbind(-2)):
        yield Node.head_node(l, h, position), write


def head_results(
    model: nn.Module, cache: ActivationCache, layer: int, at: tuple = (slice(None),), *, z_only: bool = False
) -> torch.Tensor | None:
    """Every head's write ``[..., head, d_model]`` at ``at`` (an index into ``[batch, pos]``), without ``b_O``.

    ``hook_result`` where it was cached; else ``hook_z @ W_O`` in the cache's dtype, as ``hook_result`` would
    hold it. With ``z_only``, always ``hook_z @ W_O``, in float32. ``None`` when neither hook was cached.
    """
    result, z = f"blocks.{layer}.attn.hook_result", f"blocks.{layer}.attn.hook_z"
    if result in cache and not z_only:
        return cache[result][at]
    if z not in cache:
        return None
    z = cache[z][at].float() if z_only else cache[z][at]  # [..., head, d_head]
    w_o = model.blocks[layer].attn.W_O.detach().to(z.device, z.dtype)  # [head, d_head, d_model]
    return torch.einsum("...he,hed->...hd", z, w_o)


def _mlp_parts(
    cache: ActivationCache,
    l: int,
    position: int | None,
    shown: str,
    parts: _Parts,
    transcoders: SparseDictionary | None,
) -> None:
    """Layer ``l``'s MLP write: one part, or the transcoders' features, decoder bias, skip and error."""
    at = (slice(None),) if position is None else (0, position)
    mlp_out = cache[f"blocks.{l}.hook_mlp_out"][at].float()
    if transcoders is None or l not in written_layers(transcoders):
        parts.add(Node.mlp(l, position, shown=shown), mlp_out)
        return
    rest = mlp_out.clone()
    for node, vector in feature_writes(transcoders, cache, l, position, shown):
        parts.add(node, vector)
        rest = rest - vector.float()
    parts.add(Node.error(l, position, shown=shown), rest)


def decompose_resid(
    model: nn.Module, cache: ActivationCache, layer: int, where: Where = "pre"
) -> tuple[list[str], torch.Tensor]:
    """Split ``blocks.{layer}.hook_resid_{where}`` into the writes of every component before it.

    Args:
        model: the model that produced ``cache``.
        cache: holds at least :func:`decompose_names` ``(model, layer, where)`` (``hook_z`` may stand in for
            ``hook_result``: the results are then computed as ``z @ W_O``).
        layer: block index; with ``where="pre"``, ``n_layers`` means the final stream (the last block's
            ``hook_resid_post``, before any final norm).
        where: ``"pre"``, ``"mid"`` or ``"post"``.

    Returns:
        ``(labels, parts)``: labels such as ``embed``, ``pos_embed``, ``L0H3``, ``L0_attn_bias``, ``L0_mlp``
        (post-norm models add ``embed_ln_bias``, ``L0_ln1_bias``, ``L0_ln2_bias``), and
        ``parts [component, batch, pos, d_model]`` in float32 with ``parts.sum(0)`` equal to the stream.

    Raises:
        MissingHooksError: the cache lacks a needed hook (the message names them all).
    """
    _check(model, cache, layer, where, "result", "decompose_resid")
    nodes, parts = _walk(model, cache, layer, where, None, "result", None, None)
    return [_label(node) for node in nodes], parts


def _label(node: Node) -> str:
    """:func:`decompose_resid`'s label of a part: ``embed``, ``L0H3``, ``L0_attn_bias``, ``L0_ln1_bias``..."""
    fixed = {"token": "embed", "pos_embed": "pos_embed", "head": f"L{node.layer}H{node.head}"}
    fixed |= {"attn_bias": f"L{node.layer}_attn_bias", "mlp": f"L{node.layer}_mlp"}
    if node.kind in fixed:
        return fixed[node.kind]
    layer = "" if node.layer is None else f"L{node.layer}_"
    return f"{layer}{node.name.removesuffix('.b')}_bias"  # a norm's bias: embed_ln_bias, L0_ln1_bias
