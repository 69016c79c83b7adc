"""LorsaLayer: the weights of one Lorsa layer and its computation, from the attention's input to its output.

The steps, each a method a graph or a splice can call on its own (shapes for ``x [batch, pos, d_model]``):

1. :meth:`queries_keys`: ``q``, ``k`` ``[batch, pos, qk_head, d_qk_head]`` (projection, bias, the optional per-head
   RMS norm, rotary at the sequence's positions); :meth:`values`: ``v [batch, pos, head]``, one number per head
   and position (``x . W_V[h] + b_V[h]``);
2. :meth:`pattern`: ``[batch, qk_head, query, key]``, the causal softmax of ``q . k / attn_scale`` over the
   sequence's real tokens;
3. :meth:`mix`: ``z [batch, pos, head]``, each head's value mixed by its QK head's pattern (the pre-activation);
4. :meth:`activate`: the activation function over the heads of each position (top-k by default);
5. :meth:`decode`: ``acts @ W_O + b_O``, each active head writing its one direction.

With the pattern held fixed, steps 3 to 5 are linear in ``x`` up to the choice of active heads: this is what
makes a Lorsa feature a graph node (its encoder row is ``W_V[h]``, read at every key through the pattern, and
its decoder row ``W_O[h]``). :meth:`pre_acts` runs 1 to 3 with the fused attention kernel unless a caller asks
for the pattern, so that nothing ``[batch, head, query, key]`` is formed when nothing reads it.

Positions follow the model's rule: they count the real tokens of a sequence (``valid [batch, pos]``), so a
left-padded sequence sees the positions it would unpadded, and no query attends to a padding key.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from interp.model.masks import LayerMask, Masks
from interp.model.positional import apply_rotary, scaled_frequencies
from interp.sae.activation import activate
from interp.sae.lorsa.config import LorsaConfig

Tap = Callable[[str, torch.Tensor], torch.Tensor]
"""``(name, tensor) -> tensor``: what a caller does with ``q``, ``k``, ``v`` and ``pattern`` on the way (a splice
passes them through its hook points)."""


class LorsaLayer(nn.Module):
    """One Lorsa layer (see :class:`~interp.sae.lorsa.config.LorsaConfig` for the fields).

    Parameters (``n`` heads, ``m`` QK heads, ``e = d_qk_head``, ``d = d_model``): ``W_Q``, ``W_K [m, d, e]``,
    ``b_Q``, ``b_K [m, e]``, ``W_V [n, d]``, ``b_V [n]``, ``W_O [n, d]``, ``b_O [d]``; ``q_norm``, ``k_norm
    [m, e]`` with ``qk_norm="rmsnorm"``; ``threshold [n]`` for ``jumprelu``. They are created as zeros (a
    loader fills them; training initialises them).

    >>> layer = LorsaLayer(LorsaConfig(d_model=8, n_heads=6, n_qk_heads=2, d_qk_head=4, k=2))
    >>> _ = [torch.nn.init.normal_(p) for p in layer.parameters()]
    >>> pre, acts = layer.encode(torch.randn(1, 5, 8))
    >>> pre.shape, int((acts != 0).sum(-1).max())
    (torch.Size([1, 5, 6]), 2)
    """

    def __init__(self, cfg: LorsaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n, m, e, d = cfg.n_heads, cfg.n_qk_heads, cfg.d_qk_head, cfg.d_model
        self.W_Q = nn.Parameter(torch.zeros(m, d, e))
        self.W_K = nn.Parameter(torch.zeros(m, d, e))
        self.b_Q = nn.Parameter(torch.zeros(m, e))
        self.b_K = nn.Parameter(torch.zeros(m, e))
        self.W_V = nn.Parameter(torch.zeros(n, d))
        self.b_V = nn.Parameter(torch.zeros(n))
        self.W_O = nn.Parameter(torch.zeros(n, d))
        self.b_O = nn.Parameter(torch.zeros(d))
        self.q_norm = nn.Parameter(torch.ones(m, e)) if cfg.qk_norm == "rmsnorm" else None
        self.k_norm = nn.Parameter(torch.ones(m, e)) if cfg.qk_norm == "rmsnorm" else None
        self.threshold = nn.Parameter(torch.zeros(n)) if cfg.activation == "jumprelu" else None
        # Plain attributes, not buffers: moving the layer to bfloat16 must not round the frequencies.
        self.inv_freq, self.attention_factor = (
            scaled_frequencies(cfg.rotary_base, cfg.rotary_dim, cfg.rotary_scaling, cfg.n_ctx)
            if cfg.positional == "rotary"
            else (None, 1.0)
        )

    # -- 1. queries, keys, values --------------------------------------------------------------------------

    def queries_keys(
        self, x: torch.Tensor, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``q``, ``k`` ``[batch, pos, qk_head, d_qk_head]`` after the q/k norm and rotary."""
        return self.qkv(x, valid, with_values=False)[:2]

    def qkv(
        self, x: torch.Tensor, valid: torch.Tensor | None = None, *, with_values: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(q, k, v)`` in one matrix product of ``x`` with the layer's reads (``v``: :meth:`values`)."""
        m, e = self.cfg.n_qk_heads, self.cfg.d_qk_head
        reads = [self.W_Q.permute(1, 0, 2).flatten(1), self.W_K.permute(1, 0, 2).flatten(1)]
        biases = [self.b_Q.flatten(), self.b_K.flatten()]
        if with_values:
            reads, biases = reads + [self.W_V.T], biases + [self.b_V]
        out = torch.addmm(torch.cat(biases), x.to(self.W_Q.dtype).flatten(0, -2), torch.cat(reads, dim=1))
        out = out.unflatten(0, x.shape[:-1])  # [batch, pos, 2 * qk_head * d_qk_head (+ head)]
        q = out[..., : m * e].unflatten(-1, (m, e))  # [batch, pos, qk_head, d_qk_head]
        k = out[..., m * e : 2 * m * e].unflatten(-1, (m, e))
        v = out[..., 2 * m * e :] if with_values else None  # [batch, pos, head]
        if self.q_norm is not None:
            q, k = self._rms(q, self.q_norm), self._rms(k, self.k_norm)
        if self.inv_freq is not None:
            cos, sin = self.rotary(positions(x.shape[0], x.shape[1], valid, x.device), q.dtype)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        return q, k, v

    def values(self, x: torch.Tensor) -> torch.Tensor:
        """``v [batch, pos, head]``: each head's read ``x . W_V[h] + b_V[h]``."""
        return x.to(self.W_V.dtype) @ self.W_V.T + self.b_V

    def rotary(self, pos: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[batch, pos, 1, rotary_dim]`` at positions ``pos [batch, pos]`` (rotate-half layout)."""
        inv_freq, factor = self.inv_freq, self.attention_factor
        scaling = self.cfg.rotary_scaling
        if scaling is not None and scaling.kind in ("dynamic", "longrope"):  # these depend on the length run
            inv_freq, factor = scaled_frequencies(
                self.cfg.rotary_base, self.cfg.rotary_dim, scaling, self.cfg.n_ctx, int(pos.max()) + 1
            )
        freqs = pos[..., None].float() * inv_freq.to(pos.device)  # [batch, pos, rotary_dim / 2]
        angles = torch.cat([freqs, freqs], dim=-1)[:, :, None, :]  # [batch, pos, 1, rotary_dim]
        return (angles.cos() * factor).to(dtype), (angles.sin() * factor).to(dtype)

    def _rms(self, x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        """The per-head RMS norm over ``d_qk_head`` with each head's gain, computed in float32 at least."""
        wide = x.float() if x.dtype not in (torch.float32, torch.float64) else x
        scale = (wide.pow(2).mean(-1, keepdim=True) + self.cfg.eps).sqrt()
        return (wide / scale * gain).to(x.dtype)

    # -- 2, 3. pattern and value mixture -----------------------------------------------------------------

    def scores(self, q: torch.Tensor, k: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """``[batch, qk_head, query, key]``: ``q . k / attn_scale``, ``-inf`` where a query may not look."""
        scores = torch.einsum("bqme,bkme->bmqk", q, k) / self.cfg.attn_scale  # [batch, qk_head, query, key]
        allowed = layer_mask(q.shape[1], valid, q.device).dense(q.shape[1], k.shape[1], q.device)
        return scores if allowed is None else scores.masked_fill(~allowed, float("-inf"))

    def pattern(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """``[batch, qk_head, query, key]``: each QK head's attention over the keys; rows sum to one."""
        q, k = self.queries_keys(x, valid)
        return softmax(self.scores(q, k, valid), q.dtype)

    def mix(self, pattern: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``z [batch, pos, head]``: head ``h``'s values ``v [batch, pos, head]`` mixed by its QK head's row."""
        grouped = v.unflatten(-1, (self.cfg.n_qk_heads, self.cfg.group_size))  # [batch, key, qk_head, group]
        z = torch.einsum("bmqk,bkmr->bqmr", pattern.to(v.dtype), grouped)  # [batch, query, qk_head, group]
        return z.flatten(-2)

    def pre_acts(
        self,
        x: torch.Tensor,
        valid: torch.Tensor | None = None,
        *,
        tap: Tap | None = None,
        explicit: bool = False,
    ) -> torch.Tensor:
        """``z [batch, pos, head]`` of ``x [batch, pos, d_model]``.

        Args:
            valid: ``[batch, pos]`` True at real tokens, or ``None`` when all are real.
            tap: called on ``q``, ``k``, ``v`` and (on the explicit path) ``pattern``; what it returns is used.
            explicit: form the pattern (a caller reads or edits it); otherwise the fused kernel runs.
        """
        q, k, v = self.qkv(x, valid)
        if tap is not None:
            q, k, v = tap("q", q), tap("k", k), tap("v", v)
        if explicit:
            pattern = softmax(self.scores(q, k, valid), q.dtype)
            if tap is not None:
                pattern = tap("pattern", pattern)
            return self.mix(pattern, v)
        return self._fused(q, k, v, valid)

    def _fused(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, valid: torch.Tensor | None
    ) -> torch.Tensor:
        """The value mixture through ``scaled_dot_product_attention``, each QK head's group as its values."""
        grouped = v.unflatten(-1, (self.cfg.n_qk_heads, self.cfg.group_size))  # [batch, key, qk_head, group]
        mask = layer_mask(q.shape[1], valid, q.device)
        z = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            grouped.transpose(1, 2).to(q.dtype),
            attn_mask=mask.allowed,
            is_causal=mask.is_causal,
            scale=1.0 / self.cfg.attn_scale,
        )  # [batch, qk_head, query, group]
        return z.transpose(1, 2).flatten(-2).to(v.dtype)  # [batch, pos, head]

    # -- 4, 5. activation and output ---------------------------------------------------------------------

    def activate(self, z: torch.Tensor) -> torch.Tensor:
        """Activations ``[..., head]``; with ``gate_by_decoder_norm`` the heads are chosen by ``z * |W_O[h]|``."""
        cfg = self.cfg
        if not cfg.gate_by_decoder_norm:
            return activate(z, cfg.activation, rectify=True, k=cfg.k, threshold=self.threshold)
        norm = self.W_O.norm(dim=-1)  # [head]
        return activate(z * norm, cfg.activation, rectify=True, k=cfg.k, threshold=self.threshold) / norm

    def encode(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z, acts)``, both ``[batch, pos, head]``."""
        z = self.pre_acts(x, valid)
        return z, self.activate(z)

    def decode(self, acts: torch.Tensor) -> torch.Tensor:
        """``[..., d_model]``: each head's activation times its output direction, plus ``b_O``."""
        return acts.to(self.W_O.dtype) @ self.W_O + self.b_O

    @torch.no_grad()
    def fold_scales(self, scale_in: float, scale_out: float) -> LorsaLayer:
        """Fold constant scales into the weights (in place): trained to map ``x * scale_in`` to ``y * scale_out``
        (llamascopium's dataset-wise normalisation, the trainer's), it then maps ``x`` to ``y`` with the same
        activations, heads and patterns."""
        if scale_in != 1.0:
            for w in (self.W_Q, self.W_K, self.W_V):
                w.mul_(scale_in)
        if scale_out != 1.0:
            self.W_O.div_(scale_out)
            self.b_O.div_(scale_out)
            if self.threshold is not None and self.cfg.gate_by_decoder_norm:
                self.threshold.div_(scale_out)  # compared with z * |W_O[h]|, which shrank by scale_out
        return self

    def extra_repr(self) -> str:
        cfg = self.cfg
        k = f", k={cfg.k}" if cfg.k is not None else ""
        pos = (
            f"rotary(dim={cfg.rotary_dim}, base={cfg.rotary_base:g})"
            if cfg.positional == "rotary"
            else "none"
        )
        return (
            f"{cfg.activation}{k}, n_heads={cfg.n_heads}, n_qk_heads={cfg.n_qk_heads}, d_qk_head={cfg.d_qk_head}, "
            f"positions={pos}, qk_norm={cfg.qk_norm!r}"
        )


def positions(batch: int, n_pos: int, valid: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """``[batch, pos]``: each token's position, counting real tokens only (the model's own rule)."""
    if valid is None:
        return torch.arange(n_pos, device=device).expand(batch, n_pos)
    return (valid.to(device).long().cumsum(-1) - 1).clamp(min=0)


def layer_mask(n_pos: int, valid: torch.Tensor | None, device: torch.device) -> LayerMask:
    """The model's own mask of a full-attention layer for these tokens: causal over the real keys
    (:class:`~interp.model.masks.Masks`; a padding query sees itself, so that no row is empty)."""
    return Masks(valid, n_pos, n_pos, True, device).for_window(None)


def softmax(scores: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Each row's softmax over the keys, in float32 at least."""
    wide = scores.dtype if scores.dtype in (torch.float32, torch.float64) else torch.float32
    return scores.softmax(dim=-1, dtype=wide).to(dtype)
