"""Position information: learned or sinusoidal vectors added to the embeddings, or rotary embeddings.

Attention by itself is blind to order (permute the tokens and, without a causal mask, every output permutes
the same way), so position must be injected. Additive schemes write a vector per position into the stream
(``hook_pos_embed``); rotary embeddings instead rotate each query and key by an angle proportional to its
position, so that scores depend on relative offsets and nothing positional is written into the stream.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from interp.config import TransformerConfig


def sinusoidal_table(n_ctx: int, d_model: int) -> torch.Tensor:
    """Vaswani et al. (2017): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same)."""
    pos = torch.arange(n_ctx, dtype=torch.float64)[:, None]  # [pos, 1]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(n_ctx, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table.float()  # [n_ctx, d_model]


class PosEmbed(nn.Module):
    """Additive positions: a learned table ``W_pos`` or the fixed sinusoidal one."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        if cfg.positional == "learned":
            self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))
        else:
            self.register_buffer("W_pos", sinusoidal_table(cfg.n_ctx, cfg.d_model), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.W_pos[positions]  # [batch, pos, d_model]


class Rotary(nn.Module):
    """Cosines and sines for rotary embeddings, in the "rotate half" layout (dim i pairs with i + rotary_dim/2)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.rotary_dim = cfg.rotary_dim
        exponent = torch.arange(0, cfg.rotary_dim, 2, dtype=torch.float32) / cfg.rotary_dim
        self.register_buffer("inv_freq", 1.0 / cfg.rotary_base**exponent, persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions [batch, pos]`` -> ``(cos, sin)``, each ``[batch, pos, 1, rotary_dim]``."""
        freqs = positions[..., None].float() * self.inv_freq  # [batch, pos, rotary_dim / 2]
        angles = torch.cat([freqs, freqs], dim=-1)[:, :, None, :]
        return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` dims of each head of ``x [batch, pos, head, d_head]``."""
    rotary_dim = cos.shape[-1]
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    x1, x2 = x_rot.chunk(2, dim=-1)
    rotated = x_rot * cos + torch.cat([-x2, x1], dim=-1) * sin
    return torch.cat([rotated, x_pass], dim=-1) if x_pass.shape[-1] else rotated
