"""The stream entering a layer at one position, split into the writes that make it up.

This is the per-position split QK attribution starts from. It follows :func:`~interp.analysis.decompose_resid`
(embeddings, each earlier head's write, the output biases, each earlier MLP's write; norms after a sublayer or
after the add linearised with their cached scales) and goes one step further where a question about attention
needs it: a head's write at position ``p`` is itself a sum over the keys that head read,
``pattern[h, p, s] * v[s, g(h)] @ W_O[h]``, so with ``by_source=True`` each head contributes one part per
source position ``s`` (``L3H4@"tired"``: what head 3.4 carried from "tired" to ``p``). With transcoders, an
MLP's write is split into each active feature's decoder write, the decoder bias, the skip term and the error
(the MLP's output minus all of these), which add up to the MLP's write exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.norms import linearise_norm
from interp.analysis.qk.component import Component, Kind  # noqa: F401 - Kind re-exported


@dataclass
class _Parts:
    """Components and their vectors ``[d_model]`` (float32), grown layer by layer; a component added again (a
    cross-layer feature writing to several layers) adds to its vector."""

    components: list[Component] = field(default_factory=list)
    vectors: list[torch.Tensor] = field(default_factory=list)
    index: dict[Component, int] = field(default_factory=dict)

    def add(self, component: Component, vector: torch.Tensor) -> None:
        if component in self.index:
            i = self.index[component]
            self.vectors[i] = self.vectors[i] + vector.float()
            return
        self.index[component] = len(self.components)
        self.components.append(component)
        self.vectors.append(vector.float())

    def through(self, model: nn.Module, norm: nn.Module, scale: torch.Tensor, start: int, bias: str) -> None:
        """Every part from ``start`` on through ``norm`` with its scale frozen; its bias joins as a part."""
        if len(self.vectors) > start:
            normed = linearise_norm(model, norm, scale, torch.stack(self.vectors[start:]))  # [n, d_model]
            self.vectors[start:] = list(normed.unbind(0))
        if norm.b is not None:
            self.add(Component("bias", name=bias), norm.b.detach())


def stream_names(model: nn.Module, layer: int, *, by_source: bool = True) -> list[str]:
    """The hooks :func:`stream_parts` reads for the stream entering ``layer``."""
    cfg = model.cfg
    names = ["hook_embed"] + (["hook_pos_embed"] if "hook_pos_embed" in model.hook_dict else [])
    names += ["embed_ln.hook_scale"] if cfg.embed_norm else []
    for l in range(layer):
        if by_source:
            names += [f"blocks.{l}.attn.hook_pattern", f"blocks.{l}.attn.hook_v"]
        else:
            names.append(f"blocks.{l}.attn.hook_z")
        names += [f"blocks.{l}.ln1_post.hook_scale"] if model.blocks[l].ln1_post is not None else []
        names += [f"blocks.{l}.ln1.hook_scale"] if cfg.norm_placement == "post" else []
        names.append(f"blocks.{l}.hook_mlp_out")
        names += [f"blocks.{l}.ln2.hook_scale"] if cfg.norm_placement == "post" else []
    return names


def _head_writes(
    model: nn.Module, cache: ActivationCache, l: int, pos: int, by_source: bool
) -> tuple[list[int], list[int | None], torch.Tensor]:
    """Heads, sources (or ``None``) and writes ``[n, d_model]`` of layer ``l``'s heads at ``pos``, without
    ``b_O``."""
    attn = model.blocks[l].attn
    w_o = attn.W_O.detach().float()  # [head, d_head, d_model]
    if not by_source:
        z = cache[f"blocks.{l}.attn.hook_z"][0, pos].float()  # [head, d_head]
        result = torch.einsum("he,hed->hd", z, w_o.to(z.device))  # [head, d_model]
        return list(range(result.shape[0])), [None] * result.shape[0], result
    pattern = cache[f"blocks.{l}.attn.hook_pattern"][0, :, pos].float()  # [head, key]
    heads, sources = pattern.nonzero(as_tuple=True)  # the keys each head read
    v = cache[f"blocks.{l}.attn.hook_v"][0].float()  # [key, kv_head, d_head]
    v = v.repeat_interleave(model.cfg.group_size, dim=1)  # [key, head, d_head]
    vo = torch.einsum("she,hed->hsd", v, w_o.to(v.device))  # [head, key, d_model]
    return heads.tolist(), sources.tolist(), pattern[heads, sources, None] * vo[heads, sources]


def stream_parts(
    model: nn.Module,
    cache: ActivationCache,
    layer: int,
    pos: int,
    tokens: list[str],
    *,
    by_source: bool = True,
    transcoders: Any = None,
) -> tuple[list[Component], torch.Tensor]:
    """``blocks.{layer}.hook_resid_pre`` at ``pos`` (batch row 0) as components and ``[n, d_model]`` parts.

    The parts are float32 and sum to the stream. ``tokens`` are the token strings the labels show.
    """
    cfg = model.cfg
    parts = _Parts()
    parts.add(Component("embed", pos, token=tokens[pos]), cache["hook_embed"][0, pos])
    if "hook_pos_embed" in model.hook_dict:
        parts.add(Component("pos_embed", pos, token=tokens[pos]), cache["hook_pos_embed"][0, pos])
    if cfg.embed_norm:
        parts.through(model, model.embed_ln, cache["embed_ln.hook_scale"][0, pos], 0, "embed_ln.b")
    for l in range(layer):
        block = model.blocks[l]
        start = len(parts.vectors)
        heads, sources, writes = _head_writes(model, cache, l, pos, by_source)
        for h, s, write in zip(heads, sources, writes.unbind(0), strict=True):
            shown = tokens[s] if s is not None else ""
            parts.add(Component("head", pos, l, h, source=s, token=shown), write)
        if block.attn.b_O is not None:
            parts.add(Component("attn_bias", layer=l), block.attn.b_O.detach())
        if block.ln1_post is not None:  # the attention output is normed before the add
            scale = cache[f"blocks.{l}.ln1_post.hook_scale"][0, pos]
            parts.through(model, block.ln1_post, scale, start, f"L{l} ln1_post.b")
        if cfg.norm_placement == "post":
            parts.through(model, block.ln1, cache[f"blocks.{l}.ln1.hook_scale"][0, pos], 0, f"L{l} ln1.b")
        _mlp_parts(model, cache, l, pos, tokens, parts, transcoders)
        if cfg.norm_placement == "post":
            parts.through(model, block.ln2, cache[f"blocks.{l}.ln2.hook_scale"][0, pos], 0, f"L{l} ln2.b")
    return parts.components, torch.stack(parts.vectors)  # [component, d_model]


def _mlp_parts(
    model: nn.Module,
    cache: ActivationCache,
    l: int,
    pos: int,
    tokens: list[str],
    parts: _Parts,
    transcoders: Any,
) -> None:
    """Layer ``l``'s MLP write at ``pos``: one part, or the transcoder's features, bias, skip and error."""
    mlp_out = cache[f"blocks.{l}.hook_mlp_out"][0, pos].float()
    if transcoders is None or not transcoder_writes(transcoders, l):
        parts.add(Component("mlp", pos, l, token=tokens[pos]), mlp_out)
        return
    from interp.analysis.qk.transcoders import feature_parts  # only with transcoders

    rest = mlp_out.clone()
    for component, vector in feature_parts(transcoders, cache, l, pos, tokens[pos]):
        parts.add(component, vector)
        rest = rest - vector.float()
    parts.add(Component("error", pos, l, token=tokens[pos]), rest)


def transcoder_writes(transcoders: Any, out_layer: int) -> bool:
    """Whether some transcoder layer writes into ``out_layer``'s MLP output."""
    return any(out_layer in transcoders.output_layers(layer) for layer in transcoders.layers)
