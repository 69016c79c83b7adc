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

from interp.config import RotaryScaling, TransformerConfig


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
    """Cosines and sines for rotary embeddings, in the "rotate half" layout (dim i pairs with i + rotary_dim/2).

    Full-attention layers use ``rotary_base`` with the config's scaling; sliding-window layers use
    ``local_rotary_base`` when it is set (Gemma 3), unscaled. :meth:`forward` returns one ``(cos, sin)`` per
    layer type, computed once per forward pass.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.rotary_dim = cfg.rotary_dim
        self.n_ctx = cfg.n_ctx
        self.scaling = cfg.rotary_scaling
        self.base = cfg.rotary_base
        # Plain attributes, not buffers: model.to(bfloat16) must not round the frequencies.
        self.inv_freq, self.attention_factor = scaled_frequencies(
            cfg.rotary_base, cfg.rotary_dim, cfg.rotary_scaling, cfg.n_ctx
        )
        self.inv_freq_local = None
        if cfg.local_rotary_base is not None:
            self.inv_freq_local, _ = scaled_frequencies(
                cfg.local_rotary_base, cfg.rotary_dim, None, cfg.n_ctx
            )

    def forward(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """``positions [batch, pos]`` -> ``{"full": (cos, sin), "sliding": (cos, sin)}``, each
        ``[batch, pos, 1, rotary_dim]`` (the two are the same tables unless the bases differ)."""
        inv_freq, factor = self.inv_freq, self.attention_factor
        if self.scaling is not None and self.scaling.kind in ("dynamic", "longrope"):
            # These two depend on the length of the sequence being run, as in the reference implementation.
            seq_len = int(positions.max()) + 1
            inv_freq, factor = scaled_frequencies(
                self.base, self.rotary_dim, self.scaling, self.n_ctx, seq_len
            )
        full = _angles(positions, inv_freq, factor, dtype)
        local = full if self.inv_freq_local is None else _angles(positions, self.inv_freq_local, 1.0, dtype)
        return {"full": full, "sliding": local}


def _angles(
    positions: torch.Tensor, inv_freq: torch.Tensor, factor: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = positions[..., None].float() * inv_freq.to(positions.device)  # [batch, pos, rotary_dim / 2]
    angles = torch.cat([freqs, freqs], dim=-1)[:, :, None, :]  # [batch, pos, 1, rotary_dim]
    cos, sin = angles.cos(), angles.sin()
    if factor != 1.0:
        cos, sin = cos * factor, sin * factor
    return cos.to(dtype), sin.to(dtype)


def scaled_frequencies(
    base: float, dim: int, scaling: RotaryScaling | None, n_ctx: int, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies ``[dim / 2]`` and the factor cosines and sines are multiplied by.

    ``scaling=None`` is plain rotary, ``base ** (-2i / dim)``. The scaled kinds follow their papers and the
    reference implementations: linear position interpolation (Chen et al. 2023), dynamic NTK-aware base
    growth, Llama 3.1's frequency-band rule, YaRN (Peng et al. 2023) and LongRoPE (Ding et al. 2024);
    ``"factors"`` divides each frequency by a given divisor (Llama 3.1's rule as GGUF files store it).
    ``seq_len`` is the length being run, read by the two kinds that depend on it (dynamic, longrope).
    """
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim  # [dim / 2]
    inv_freq = 1.0 / base**exponents
    if scaling is None:
        return inv_freq, 1.0
    kind = scaling.kind
    if kind == "linear":
        return inv_freq / scaling.factor, 1.0
    if kind == "dynamic":
        original = scaling.original_n_ctx or n_ctx
        length = max(seq_len or original, original)
        grown = base * ((scaling.factor * length / original) - (scaling.factor - 1)) ** (dim / (dim - 2))
        return 1.0 / grown**exponents, 1.0
    if kind == "llama3":
        return _llama3(inv_freq, scaling), 1.0
    if kind == "factors":
        return inv_freq / _divisors(scaling.factors, inv_freq, "factors"), 1.0
    factor = scaling.factor if scaling.factor is not None else n_ctx / scaling.original_n_ctx
    if kind == "yarn":
        return _yarn(base, dim, exponents, factor, scaling)
    # longrope: per-frequency divisors, the long set once the sequence passes the pretraining context
    long = seq_len is not None and seq_len > scaling.original_n_ctx
    divisors = _divisors(scaling.long_factor if long else scaling.short_factor, inv_freq, "longrope factors")
    attention = scaling.attention_factor
    if attention is None:
        attention = (
            1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(scaling.original_n_ctx))
        )
    return 1.0 / (divisors * base**exponents), attention


def _divisors(values: tuple[float, ...], inv_freq: torch.Tensor, what: str) -> torch.Tensor:
    """Per-frequency divisors as a tensor, one per inverse frequency (``rotary_dim / 2``)."""
    divisors = torch.tensor(values, dtype=torch.float32)
    if divisors.shape != inv_freq.shape:
        raise ValueError(
            f"{what} have {divisors.numel()} entries; rotary_dim={2 * inv_freq.numel()} needs "
            f"{inv_freq.numel()}"
        )
    return divisors


def _llama3(inv_freq: torch.Tensor, scaling: RotaryScaling) -> torch.Tensor:
    """Llama 3.1: wavelengths longer than ``original / low_freq_factor`` are divided by ``factor``, those
    shorter than ``original / high_freq_factor`` kept, and the band between interpolated smoothly."""
    factor, old = scaling.factor, scaling.original_n_ctx
    low, high = scaling.low_freq_factor, scaling.high_freq_factor
    wavelength = 2 * math.pi / inv_freq
    smooth = ((old / wavelength - low) / (high - low)).clamp(0.0, 1.0)
    scaled = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    kept = torch.where(wavelength < old / high, inv_freq, scaled)
    return torch.where(wavelength > old / low, inv_freq / factor, kept)


def _yarn(
    base: float, dim: int, exponents: torch.Tensor, factor: float, scaling: RotaryScaling
) -> tuple[torch.Tensor, float]:
    """YaRN: frequencies that turn fewer than ``beta_slow`` times over the original context are interpolated,
    those turning more than ``beta_fast`` times kept, with a linear ramp in between; the attention factor
    ``0.1 ln(factor) + 1`` compensates the entropy change."""

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(scaling.original_n_ctx / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(scaling.beta_fast), correction_dim(scaling.beta_slow)
    if scaling.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # a ramp of zero width would divide by zero
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1: extrapolate (keep the frequency), 0: interpolate (divide by factor)
    powers = base**exponents
    inv_freq = (1.0 / (factor * powers)) * (1 - keep) + (1.0 / powers) * keep

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = scaling.attention_factor
    if attention is None:
        if scaling.mscale and scaling.mscale_all_dim:
            attention = mscale(factor, scaling.mscale) / mscale(factor, scaling.mscale_all_dim)
        else:
            attention = mscale(factor)
    return inv_freq, float(attention)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``rotary_dim`` dims of each head of ``x [batch, pos, head, d_head]``."""
    rotary_dim = cos.shape[-1]
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    x1, x2 = x_rot.chunk(2, dim=-1)
    rotated = x_rot * cos + torch.cat([-x2, x1], dim=-1) * sin
    return torch.cat([rotated, x_pass], dim=-1) if x_pass.shape[-1] else rotated
