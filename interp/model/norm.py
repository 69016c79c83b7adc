"""LayerNorm and RMSNorm with hooks on the divisor and the normalised vector.

``hook_scale`` is what the input is divided by (sqrt of the variance or mean square, plus eps) and
``hook_normalized`` the result before the learned gain and bias, as in the convention users know: freezing
``hook_scale`` makes the norm linear, which is what decompositions of the stream rely on. When neither hook is
in use the fused kernel runs instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig


class Norm(nn.Module):
    """``cfg.norm`` over the last axis: ``layernorm`` (centre, divide by std) or ``rmsnorm`` (divide by RMS)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.kind = cfg.norm
        self.eps = cfg.eps
        self.w = nn.Parameter(torch.ones(cfg.d_model))
        self.b = nn.Parameter(torch.zeros(cfg.d_model)) if cfg.norm == "layernorm" else None
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.hook_scale.active or self.hook_normalized.active):
            if self.kind == "layernorm":
                return F.layer_norm(x, self.w.shape, self.w, self.b, self.eps)
            return F.rms_norm(x.float(), self.w.shape, None, self.eps).to(x.dtype) * self.w
        dtype = x.dtype
        x = x.float()  # statistics in float32, as the reference implementations do under bfloat16
        if self.kind == "layernorm":
            x = x - x.mean(-1, keepdim=True)
        scale = self.hook_scale((x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt().to(dtype))
        normalized = self.hook_normalized((x / scale.float()).to(dtype))
        out = normalized * self.w
        return out + self.b if self.b is not None else out
