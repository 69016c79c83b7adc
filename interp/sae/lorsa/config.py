"""LorsaConfig: one layer of low-rank sparse attention, independent of the file format it came in.

Lorsa (He et al. 2025, "Towards Understanding the Nature of Attention with Low-Rank Sparse Decomposition")
replaces an attention sublayer by many small heads: ``n_heads`` heads, each with a rank-one OV circuit (it
reads one direction ``W_V[h]`` of each key position and writes one direction ``W_O[h]``), sharing ``n_qk_heads``
QK circuits in groups of ``n_heads // n_qk_heads`` consecutive heads, with only the ``k`` heads of largest
output active at each query position. Each head is a feature: its activation at a query is its value mixture
``z[h] = sum_key pattern[group(h), query, key] * (x_key . W_V[h] + b_V[h])`` through the activation function.

The positions are the model family's: rotary embeddings with the family's base, rotated dimensions and
scaling (the formulas of :mod:`interp.model.positional`, in its rotate-half layout), or none; the pattern is
causal over the real tokens of a sequence. Queries and keys may pass a per-head RMS norm first (Qwen3, Gemma 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from interp.config import RotaryScaling
from interp.sae.activation import ACTIVATIONS

LorsaPositional = Literal["rotary", "none"]
QKNorm = Literal["none", "rmsnorm"]


@dataclass(frozen=True, kw_only=True)
class LorsaConfig:
    """One Lorsa layer.

    Attributes:
        d_model: width of the stream read and written.
        n_heads: OV heads, the features (``d_sae`` in llamascopium's terms).
        n_qk_heads: QK heads; head ``h`` uses QK head ``h // (n_heads // n_qk_heads)``.
        d_qk_head: width of one query or key.
        positional: ``"rotary"`` or ``"none"``.
        rotary_dim: dimensions of each query and key that rotate (the first ones, rotate-half layout); default
            ``d_qk_head``.
        rotary_base: base of the rotary frequencies.
        rotary_scaling: the family's :class:`~interp.config.RotaryScaling`, or ``None``.
        n_ctx: the context the scaled frequencies are computed for (read by ``dynamic``, ``yarn``, ``longrope``).
        attn_scale: scores are divided by this; default ``sqrt(d_qk_head)``.
        qk_norm: ``"rmsnorm"``: each query and key head is RMS-normalised over ``d_qk_head`` with a gain of its
            own, before rotary; ``"none"``.
        eps: the q/k norm's epsilon.
        activation: ``relu``, ``jumprelu``, ``topk`` or ``batchtopk`` (:mod:`interp.sae.activation`, the values
            kept passing a ReLU, as llamascopium computes them).
        k: active heads per token for ``topk`` (a mean for ``batchtopk``).
        gate_by_decoder_norm: heads are chosen (and JumpReLU thresholds compared) by ``z * |W_O[h]|``, the size
            of what each writes, and keep the value ``z`` (llamascopium's ``sparsity_include_decoder_norm``).
        input_site, output_site: the hooks inside the block read and written.
    """

    d_model: int
    n_heads: int
    n_qk_heads: int
    d_qk_head: int
    positional: LorsaPositional = "rotary"
    rotary_dim: int | None = None
    rotary_base: float = 10000.0
    rotary_scaling: RotaryScaling | None = None
    n_ctx: int = 2048
    attn_scale: float | None = None
    qk_norm: QKNorm = "none"
    eps: float = 1e-6
    activation: str = "topk"
    k: int | None = None
    gate_by_decoder_norm: bool = False
    input_site: str = "ln1.hook_normalized"
    output_site: str = "hook_attn_out"

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "n_qk_heads", "d_qk_head", "n_ctx"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}; expected a positive int")
        if self.n_heads % self.n_qk_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not a multiple of n_qk_heads={self.n_qk_heads}; each QK head serves "
                "a group of n_heads // n_qk_heads OV heads"
            )
        if self.positional not in ("rotary", "none"):
            raise ValueError(f"positional={self.positional!r}; expected 'rotary' or 'none'")
        if self.rotary_dim is None:
            object.__setattr__(self, "rotary_dim", self.d_qk_head)
        if self.positional == "rotary" and (
            self.rotary_dim > self.d_qk_head or self.rotary_dim % 2 or not self.rotary_dim
        ):
            raise ValueError(
                f"rotary_dim={self.rotary_dim} must be even, positive and at most d_qk_head={self.d_qk_head}"
            )
        if isinstance(self.rotary_scaling, dict):
            object.__setattr__(self, "rotary_scaling", RotaryScaling(**self.rotary_scaling))
        if self.attn_scale is None:
            object.__setattr__(self, "attn_scale", math.sqrt(self.d_qk_head))
        if not self.attn_scale > 0:
            raise ValueError(f"attn_scale={self.attn_scale!r}; expected a positive number")
        if self.qk_norm not in ("none", "rmsnorm"):
            raise ValueError(f"qk_norm={self.qk_norm!r}; expected 'none' or 'rmsnorm'")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r}; expected one of {list(ACTIVATIONS)}")
        if self.activation in ("topk", "batchtopk"):
            if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
                raise ValueError(
                    f"a {self.activation} Lorsa needs k >= 1 active heads per token, got k={self.k!r}"
                )
        elif self.k is not None:
            raise ValueError(
                f"k={self.k!r} is for topk and batchtopk; a {self.activation} Lorsa takes k=None"
            )
        if self.k is not None and self.k > self.n_heads:
            raise ValueError(f"k={self.k} active heads per token, but the layer has n_heads={self.n_heads}")

    @property
    def group_size(self) -> int:
        """OV heads per QK head."""
        return self.n_heads // self.n_qk_heads
