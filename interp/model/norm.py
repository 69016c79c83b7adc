"""LayerNorm and RMSNorm with hooks on the divisor and the normalised vector.

``hook_scale`` is what the input is divided by (sqrt of the variance or mean square, plus eps) and
``hook_normalized`` the result before the learned gain and bias, as in the convention users know: freezing
``hook_scale`` makes the norm linear, which is what decompositions of the stream rely on. When neither hook is
in use the fused kernel runs instead.

Families differ in two details that only show in low precision, and the config carries both: Gemma multiplies
by ``1 + w`` (``norm_offset``), and Gemma and OLMo 2 multiply by the gain in float32 before casting back
(``norm_gain_in_float32``) where Llama casts first.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig


class Norm(nn.Module):
    """``cfg.norm`` over the last axis: ``layernorm`` (centre, divide by std) or ``rmsnorm`` (divide by RMS).

    Args:
        cfg: the model's config (kind, eps, offset, cast order).
        width: the size of the normalised axis; defaults to ``d_model`` (q/k norms pass their own).
    """

    def __init__(self, cfg: TransformerConfig, width: int | None = None) -> None:
        super().__init__()
        width = cfg.d_model if width is None else width
        self.kind = cfg.norm
        self.eps = cfg.eps
        self.offset = cfg.norm_offset
        self.gain_in_float32 = cfg.norm_gain_in_float32
        self.w = nn.Parameter(torch.ones(width))
        self.b = nn.Parameter(torch.zeros(width)) if cfg.norm == "layernorm" else None
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, width]

    @property
    def gain(self) -> torch.Tensor:
        """What the normalised vector is multiplied by, in float32: ``w`` plus the family's offset."""
        return self.gain_as(torch.float32)

    def gain_as(self, dtype: torch.dtype) -> torch.Tensor:
        """The gain computed in ``dtype`` (the offset is added after the cast, as the families do)."""
        w = self.w.to(dtype)
        return w + self.offset if self.offset else w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.hook_scale.active or self.hook_normalized.active):
            if self.kind == "layernorm":
                return F.layer_norm(x, self.w.shape, self.gain_as(x.dtype), self.b, self.eps)
            normalized = F.rms_norm(x.float(), self.w.shape, None, self.eps)
            return self._times_gain(normalized, x.dtype)
        dtype = x.dtype
        x = x.float()  # statistics in float32, as the reference implementations do under bfloat16
        if self.kind == "layernorm":
            x = x - x.mean(-1, keepdim=True)
        scale = self.hook_scale((x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt().to(dtype))
        normalized = self.hook_normalized((x / scale.float()).to(dtype))
        out = self._times_gain(normalized, dtype)
        return out + self.b if self.b is not None else out

    def _times_gain(self, normalized: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if self.gain_in_float32:
            return (normalized.float() * self.gain).to(dtype)
        return normalized.to(dtype) * self.gain_as(dtype)
