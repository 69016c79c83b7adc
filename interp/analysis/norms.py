"""Norms as functions of a stream: applied afresh, or linearised with their scale frozen from a run.

A LayerNorm is ``(y - mean(y)) / scale * w + b`` (``w`` is the norm's ``gain``, with any offset the family
adds) with ``scale = sqrt(var(y) + eps)``. The scale is the only
nonlinear part, so freezing it at the value a run produced (the cached ``hook_scale``) makes the norm affine:
a sum of parts maps to the sum of each part centred, divided by the scale and multiplied by ``w``, plus ``b``
once. That is how residual decompositions and direct logit attribution stay exact through norms. RMSNorm is
the same without the centring and without ``b``.
"""

from __future__ import annotations

import torch
from torch import nn


def apply_norm(model: nn.Module, norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``norm`` applied to ``x [..., d_model]`` with its own scale (as the model would), in float32."""
    x = x.float()
    if model.cfg.norm == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    scale = (x.pow(2).mean(-1, keepdim=True) + model.cfg.eps).sqrt()
    out = x / scale * norm.gain
    return out + norm.b.float() if norm.b is not None else out


def linearise_norm(
    model: nn.Module, norm: nn.Module, scale: torch.Tensor, parts: torch.Tensor
) -> torch.Tensor:
    """Each of ``parts [component, ..., d_model]`` through ``norm`` with ``scale`` frozen, without ``b``.

    The results plus ``norm.b`` sum to ``norm(parts.sum(0))`` when ``scale`` is the one that run used.
    """
    parts = parts.float()
    if model.cfg.norm == "layernorm":
        parts = parts - parts.mean(-1, keepdim=True)
    return parts / scale.to(parts.device, torch.float32) * norm.gain.to(parts.device)
