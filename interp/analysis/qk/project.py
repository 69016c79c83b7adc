"""Stream parts at one position pushed to a head's query or key, each on its own.

The path from the stream to a query is affine once the nonlinear statistics are frozen at the values the run
produced: the norm before attention (LayerNorm's centring and its divisor, or RMSNorm's), ``W_Q`` (``W_K``),
the q/k norm of families that have one (per head over ``d_head``, or over all heads' projections at once), and
rotary, which at a fixed position is a rotation. Each part goes through the linear part of that path; each
bias on the way (the norm's ``b``, ``b_Q`` / ``b_K``, the q/k norm's ``b``) joins as a part of its own. The
projected parts then add up to ``hook_rot_q`` (``hook_q`` without rotary) at that position exactly.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.node import Node
from interp.analysis.norms import linearise_norm
from interp.model.positional import apply_rotary

Side = Literal["q", "k"]


def projection_names(model: nn.Module, layer: int, side: Side) -> list[str]:
    """The hooks :func:`project` reads: the frozen scales of the norm before attention and of the q/k norm."""
    names = [f"blocks.{layer}.ln1.hook_scale"] if _pre_norm(model, layer) else []
    if model.cfg.qk_norm != "none":
        names.append(f"blocks.{layer}.attn.{side}_norm.hook_scale")
    return names


def _pre_norm(model: nn.Module, layer: int) -> bool:
    """Whether attention reads the stream through ``ln1`` (pre and sandwich placements)."""
    return model.cfg.norm_placement in ("pre", "sandwich")


def project(
    model: nn.Module,
    cache: ActivationCache,
    layer: int,
    head: int,
    pos: int,
    rotary: tuple[torch.Tensor, torch.Tensor] | None,
    components: list[Node],
    parts: torch.Tensor,
    side: Side,
) -> tuple[list[Node], torch.Tensor]:
    """``parts [n, d_model]`` at ``pos`` as head ``head``'s query (``side="q"``) or key parts ``[n', d_head]``.

    ``head`` is the query head; the key side reads its key/value head. ``rotary`` is ``(cos, sin)``
    ``[rotary_dim]`` at ``pos``, or ``None``. The returned components are ``components`` plus the biases met
    on the way, in that order.
    """
    block = model.blocks[layer]
    attn = block.attn
    components = list(components)
    x = parts.float()
    if _pre_norm(model, layer):
        x = linearise_norm(model, block.ln1, cache[f"blocks.{layer}.ln1.hook_scale"][0, pos], x)
        if block.ln1.b is not None:
            components.append(Node.bias("ln1.b"))
            x = torch.cat([x, block.ln1.b.detach().float()[None].to(x.device)])
    w, b = (attn.W_Q, attn.b_Q) if side == "q" else (attn.W_K, attn.b_K)
    y = torch.einsum("nd,hde->nhe", x, w.detach().float().to(x.device))  # [n, heads, d_head]
    if b is not None:
        components.append(Node.bias(f"b_{side.upper()}"))
        y = torch.cat([y, b.detach().float()[None].to(y.device)])  # [n + 1, heads, d_head]
    if model.cfg.qk_norm != "none":
        y = _through_qk_norm(model, cache, layer, pos, side, y, components)
    index = head if side == "q" else head // model.cfg.group_size
    y = y[:, index]  # [n, d_head]
    if rotary is not None:
        y = apply_rotary(y, *rotary)
    return components, y


def _through_qk_norm(
    model: nn.Module,
    cache: ActivationCache,
    layer: int,
    pos: int,
    side: Side,
    y: torch.Tensor,
    components: list[Node],
) -> torch.Tensor:
    """``y [n, heads, d_head]`` through the frozen q/k norm; its bias (if any) joins ``components``."""
    norm = getattr(model.blocks[layer].attn, f"{side}_norm")
    scale = cache[f"blocks.{layer}.attn.{side}_norm.hook_scale"][0, pos]  # [heads, 1] or [1]
    if model.cfg.qk_norm == "head":
        out = linearise_norm(model, norm, scale, y)  # [n, heads, d_head]
        bias = None if norm.b is None else norm.b.detach().float().expand(y.shape[1], -1)
    else:  # "full": one norm over every head's projection
        flat = linearise_norm(model, norm, scale, y.flatten(1))  # [n, heads * d_head]
        out = flat.view_as(y)
        bias = None if norm.b is None else norm.b.detach().float().view(y.shape[1:])
    if bias is not None:
        components.append(Node.bias(f"{side}_norm.b"))
        out = torch.cat([out, bias[None].to(out.device)])
    return out
