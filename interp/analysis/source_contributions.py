"""What each source token contributes to a head's output, and how large that contribution is.

A head's write at query ``q`` is a sum over keys,
``result[q, h] = sum_k pattern[h, q, k] * v[k, g(h)] @ W_O[h]``,
with ``g(h) = h // (n_heads // n_kv_heads)`` under grouped-query attention. The summands are the source
contributions; their norms are the "attention norms" of Kobayashi et al. (2020), which weigh an attention
weight by how much the attended vector actually moves the stream (the value bias is part of ``v``).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import check_index, check_layer, require_hooks


def _values_out(model: nn.Module, cache: ActivationCache, layer: int) -> torch.Tensor:
    """``v[k, g(h)] @ W_O[h]`` for every key and query head: ``[batch, key, head, d_model]``."""
    cfg = model.cfg
    v = cache[f"blocks.{layer}.attn.hook_v"]  # [batch, key, kv_head, d_head]
    w_o = rearrange(model.blocks[layer].attn.W_O.detach(), "(g r) e d -> g r e d", r=cfg.group_size)
    out = torch.einsum(
        "bkge,gred->bkgrd", v, w_o.to(v.device, v.dtype)
    )  # [batch, key, kv_head, group, d_model]
    return rearrange(out, "b k g r d -> b k (g r) d")


def _names(layer: int) -> list[str]:
    return [f"blocks.{layer}.attn.hook_pattern", f"blocks.{layer}.attn.hook_v"]


@torch.no_grad()
def source_contributions(
    model: nn.Module, cache: ActivationCache, layer: int, head: int, query_pos: int
) -> torch.Tensor:
    """Each key's share of head ``head``'s write at ``query_pos``: ``[batch, key_pos, d_model]``.

    Summed over keys it equals ``cache["blocks.{layer}.attn.hook_result"][:, query_pos, head]``.

    Args:
        cache: holds ``blocks.{layer}.attn.hook_pattern`` and ``blocks.{layer}.attn.hook_v``.
    """
    layer = check_layer(model, layer)
    head = check_index(head, model.cfg.n_heads, "head", f"a layer with n_heads={model.cfg.n_heads}")
    names = _names(layer)
    require_hooks(cache, names, "source_contributions", f"names_filter={names}")
    pattern = cache[names[0]]  # [batch, head, query, key]
    n_pos = pattern.shape[-1]
    query_pos = check_index(query_pos, n_pos, "query_pos", f"a sequence of {n_pos} tokens")
    cfg = model.cfg
    v = cache[names[1]][:, :, head // cfg.group_size]  # [batch, key, d_head]
    vo = v @ model.blocks[layer].attn.W_O[head].detach().to(v.device, v.dtype)  # [batch, key, d_model]
    return pattern[:, head, query_pos, :, None] * vo  # [batch, key, d_model]


@torch.no_grad()
def attention_norms(model: nn.Module, cache: ActivationCache, layer: int) -> torch.Tensor:
    """Kobayashi et al. (2020): ``|| pattern[q, k] * (v[k] @ W_O[h]) ||`` as ``[batch, head, query, key]``.

    Args:
        cache: holds ``blocks.{layer}.attn.hook_pattern`` and ``blocks.{layer}.attn.hook_v``.
    """
    layer = check_layer(model, layer)
    names = _names(layer)
    require_hooks(cache, names, "attention_norms", f"names_filter={names}")
    pattern = cache[names[0]]  # [batch, head, query, key]
    norms = _values_out(model, cache, layer).float().norm(dim=-1)  # [batch, key, head]
    # pattern >= 0, so the norm of pattern * vector is pattern * the norm of the vector
    return pattern.float() * rearrange(norms, "b k h -> b h 1 k")  # [batch, head, query, key]
