"""The residual stream as a sum of what each component wrote into it.

The stream entering block ``L`` of a pre-norm model is exactly ``embed + pos_embed + sum over earlier layers
of (each head's result + the attention output bias + the MLP output)``. Post-norm models (BERT) apply a norm
after every residual add; with each norm's scale frozen at the value the run produced (``hook_scale``), the
norm is affine, so every earlier part is centred, divided by that scale and multiplied by the gain, and the
norm's bias joins as a component of its own (``L{l}_ln1_bias``, ``embed_ln_bias``). Models that norm each
attention sublayer's output before the add (Gemma 2/3, OLMo 2) are linearised the same way: every head's
result goes through ``ln1_post`` with its cached scale. Either way the parts add up exactly to the cached
stream. Parts are returned in float32.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import MissingHooksError, check_layer
from interp.analysis.norms import linearise_norm

Where = Literal["pre", "mid", "post"]


def _extent(model: nn.Module, layer: int, where: str) -> tuple[int, int]:
    """How many attention and MLP sublayers have written into ``blocks.{layer}.hook_resid_{where}``."""
    if where not in ("pre", "mid", "post"):
        raise ValueError(f"where={where!r}; expected 'pre', 'mid' or 'post'")
    if where == "mid" and model.cfg.parallel_attn_mlp:
        raise ValueError("parallel blocks have no resid_mid; decompose where='pre' or 'post'")
    layer = check_layer(model, layer, allow_end=where == "pre")
    return {"pre": (layer, layer), "mid": (layer + 1, layer), "post": (layer + 1, layer + 1)}[where]


def decompose_names(model: nn.Module, layer: int, where: Where = "pre") -> list[str]:
    """The hooks :func:`decompose_resid` needs, to pass as ``names_filter`` to ``run_with_cache``.

    >>> from interp import HookedTransformer, TransformerConfig
    >>> model = HookedTransformer(TransformerConfig(n_layers=2, d_model=8, n_heads=2, d_vocab=10, n_ctx=4))
    >>> decompose_names(model, 1, "pre")
    ['hook_embed', 'hook_pos_embed', 'blocks.0.attn.hook_result', 'blocks.0.hook_mlp_out']
    """
    n_attn, n_mlp = _extent(model, layer, where)
    post = model.cfg.norm_placement == "post"
    normed_out = model.cfg.norm_placement in ("sandwich", "output")
    names = ["hook_embed"] + (["hook_pos_embed"] if "hook_pos_embed" in model.hook_dict else [])
    if model.cfg.embed_norm:
        names.append("embed_ln.hook_scale")
    for l in range(n_attn):
        names += [f"blocks.{l}.attn.hook_result"] + ([f"blocks.{l}.ln1.hook_scale"] if post else [])
        names += [f"blocks.{l}.ln1_post.hook_scale"] if normed_out else []
        if l < n_mlp:
            names += [f"blocks.{l}.hook_mlp_out"] + ([f"blocks.{l}.ln2.hook_scale"] if post else [])
    return names


def _head_results(model: nn.Module, cache: ActivationCache, l: int) -> torch.Tensor | None:
    """``[batch, pos, head, d_model]`` from ``hook_result``, or ``hook_z @ W_O`` when only z was cached."""
    if f"blocks.{l}.attn.hook_result" in cache:
        return cache[f"blocks.{l}.attn.hook_result"]
    if f"blocks.{l}.attn.hook_z" in cache:
        z = cache[f"blocks.{l}.attn.hook_z"]
        return torch.einsum(
            "bphe,hed->bphd", z, model.blocks[l].attn.W_O.detach().to(z.device, z.dtype)
        )  # [batch, pos, head, d_model]
    return None


@torch.no_grad()
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
    n_attn, n_mlp = _extent(model, layer, where)
    missing = [n for n in decompose_names(model, layer, where) if n not in cache]
    missing = [n for n in missing if not (n.endswith("hook_result") and n.replace("result", "z") in cache)]
    if missing:
        raise MissingHooksError(
            f"decompose_resid(layer={layer}, where={where!r}) needs hooks that are not in this cache: "
            f"{missing}; run model.run_with_cache(tokens, "
            f"names_filter=decompose_names(model, {layer}, {where!r}))"
        )
    cfg = model.cfg
    labels: list[str] = ["embed"]
    parts: list[torch.Tensor] = [cache["hook_embed"].float()]
    if "hook_pos_embed" in model.hook_dict:
        labels.append("pos_embed")
        parts.append(cache["hook_pos_embed"].float())
    like = parts[0]

    def add_bias(label: str, bias: torch.Tensor | None) -> None:
        if bias is not None:
            labels.append(label)
            parts.append(bias.detach().to(like.device, torch.float32).expand_as(like))

    def through_norm(norm: nn.Module, scale_name: str, label: str) -> None:
        stacked = linearise_norm(
            model, norm, cache[scale_name], torch.stack(parts)
        )  # [component, batch, pos, d]
        parts[:] = list(stacked.unbind(0))
        add_bias(label, norm.b)

    if cfg.embed_norm:
        through_norm(model.embed_ln, "embed_ln.hook_scale", "embed_ln_bias")
    for l in range(n_attn):
        block = model.blocks[l]
        results = _head_results(model, cache, l).float()  # [batch, pos, head, d_model]
        heads = list(results.unbind(2))
        if block.attn.b_O is not None:
            heads.append(block.attn.b_O.detach().to(like.device, torch.float32).expand_as(like))
        if block.ln1_post is not None:  # the attention output is normed before the add
            heads = list(
                linearise_norm(
                    model, block.ln1_post, cache[f"blocks.{l}.ln1_post.hook_scale"], torch.stack(heads)
                )
            )
        labels += [f"L{l}H{h}" for h in range(cfg.n_heads)]
        labels += [f"L{l}_attn_bias"] if block.attn.b_O is not None else []
        parts += heads
        if cfg.norm_placement == "post":
            through_norm(block.ln1, f"blocks.{l}.ln1.hook_scale", f"L{l}_ln1_bias")
        if l < n_mlp:
            labels.append(f"L{l}_mlp")
            parts.append(cache[f"blocks.{l}.hook_mlp_out"].float())
            if cfg.norm_placement == "post":
                through_norm(block.ln2, f"blocks.{l}.ln2.hook_scale", f"L{l}_ln2_bias")
    return labels, torch.stack(parts)  # [component, batch, pos, d_model]
