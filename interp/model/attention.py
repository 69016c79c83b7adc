"""Multi-head and grouped-query attention with a hook on every intermediate.

Pay only for what is asked: unless something hooks or caches this layer's ``hook_attn_scores``,
``hook_pattern`` or ``hook_result`` in the current call, the layer runs the fused
``scaled_dot_product_attention`` kernel and never materialises a ``[batch, head, query, key]`` tensor. The
explicit path computes the same thing step by step (agreeing to float tolerance), and the per-head results
``[batch, pos, head, d_model]`` are formed only when ``hook_result`` is in use. Padding, causality and
sliding windows reach the fused kernel as a boolean mask; score soft-capping (Gemma 2) cannot be expressed
to it, so a soft-capped layer always runs the explicit path, as ``transformers`` runs such models eagerly; so
does a layer with attention sinks (GPT-OSS: a learned logit per head, ``sinks``, that joins each row's softmax as
a key with a zero value, so that a query may attend to nothing; ``hook_attn_scores`` and ``hook_pattern`` hold
the real keys only, and a pattern's row sums to one minus the sink's share).

The order of operations is the reference one: project, hook ``q``/``k``/``v``, q/k norm, rotary, append to
the KV cache, scale, soft-cap, mask, softmax, mix values, project out.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig
from interp.model.head_norm import InputNorm, project_heads
from interp.model.kv_cache import KVCache
from interp.model.layout import merge_heads_in, merge_heads_out, param_in_layout
from interp.model.masks import LayerMask
from interp.model.norm import Norm
from interp.model.positional import apply_rotary

# scaled_dot_product_attention reads grouped keys and values without copying them from torch 2.5 on.
_SDPA_HAS_GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)


class Attention(nn.Module):
    """One attention sublayer. Query head ``h`` reads key/value head ``h // (n_heads // n_kv_heads)``."""

    def __init__(self, cfg: TransformerConfig, layer: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        self.layer = layer
        self.scale = 1.0 / (cfg.attn_scale if cfg.attn_scale is not None else math.sqrt(cfg.d_head))
        self.softcap = cfg.attn_softcap
        h, g, d, e = cfg.n_heads, cfg.n_kv_heads, cfg.d_model, cfg.d_head
        self.W_Q = param_in_layout((h, d, e), (0, 2, 1))  # stored as nn.Linear's [h * e, d]
        self.W_K = param_in_layout((g, d, e), (0, 2, 1))
        self.W_V = param_in_layout((g, d, e), (0, 2, 1))
        self.W_O = param_in_layout((h, e, d), (2, 0, 1))  # stored as nn.Linear's [d, h * e]
        if cfg.attn_bias:
            self.b_Q = nn.Parameter(torch.zeros(h, e))
            self.b_K = nn.Parameter(torch.zeros(g, e))
            self.b_V = nn.Parameter(torch.zeros(g, e))
            self.b_O = nn.Parameter(torch.zeros(d))
        else:
            self.b_Q = self.b_K = self.b_V = self.b_O = None
        self.sinks = nn.Parameter(torch.zeros(h)) if cfg.attn_sinks else None  # [head] a logit per head
        self.rotary = cfg.positional == "rotary"
        self.hook_q = HookPoint()  # [batch, pos, head, d_head]
        self.hook_k = HookPoint()  # [batch, pos, kv_head, d_head]
        self.hook_v = HookPoint()  # [batch, pos, kv_head, d_head]
        self.qk_norm = cfg.qk_norm
        if cfg.qk_norm != "none":
            # "head": one norm over d_head, shared by the heads; "full": over all heads' dims at once.
            per_head = cfg.qk_norm == "head"
            self.q_norm = Norm(cfg, e if per_head else h * e)
            self.k_norm = Norm(cfg, e if per_head else g * e)
        if self.rotary:
            self.hook_rot_q = HookPoint()
            self.hook_rot_k = HookPoint()
        self.hook_attn_scores = HookPoint()  # [batch, head, query, key]
        self.hook_pattern = HookPoint()  # [batch, head, query, key]
        self.hook_z = HookPoint()  # [batch, pos, head, d_head]
        self.hook_result = HookPoint()  # [batch, pos, head, d_model]

    @property
    def explicit(self) -> bool:
        """Whether this call must materialise scores and patterns (something hooks them or the results, or
        the scores are soft-capped or the layer has sinks, which the fused kernel cannot express)."""
        return (
            self.softcap is not None
            or self.sinks is not None
            or self.hook_attn_scores.active
            or self.hook_pattern.active
            or self.hook_result.active
        )

    def forward(
        self,
        x: torch.Tensor,
        mask: LayerMask,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        kv_cache: KVCache | None = None,
        *,
        x_k: torch.Tensor | None = None,
        x_v: torch.Tensor | None = None,
        norm: InputNorm | None = None,
    ) -> torch.Tensor:
        """``x [batch, pos, d_model]`` -> attention output ``[batch, pos, d_model]``.

        Args:
            mask: this layer's :class:`~interp.model.masks.LayerMask`.
            rotary: ``(cos, sin)`` from :class:`~interp.model.positional.Rotary`, for rotary models.
            kv_cache: keys and values of earlier positions; this call's are appended to it.
            x_k, x_v: separate inputs for keys and values (default: ``x``). With per-head inputs
                ``x [batch, pos, head, d_model]`` and ``x_k``, ``x_v [batch, pos, kv_head, d_model]`` each head
                reads its own stream, which is how edge-level circuits are run.
            norm: with per-head inputs, the norm they pass through before the projections (the block's
                ``ln1``), applied here so that streams the heads share are normalised and projected once per
                position (:func:`interp.model.head_norm.project_heads`).
        """
        q = self.hook_q(self._project(x, self.W_Q, self.b_Q, norm))  # [batch, pos, head, d_head]
        k = self.hook_k(
            self._project(x if x_k is None else x_k, self.W_K, self.b_K, norm)
        )  # [batch, pos, kv_head, e]
        v = self.hook_v(self._project(x if x_v is None else x_v, self.W_V, self.b_V, norm))
        if self.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        elif self.qk_norm == "full":
            q = self.q_norm(q.flatten(-2)).view_as(q)  # normalised over [head * d_head]
            k = self.k_norm(k.flatten(-2)).view_as(k)
        if self.rotary:
            q = self.hook_rot_q(apply_rotary(q, *rotary))
            k = self.hook_rot_k(apply_rotary(k, *rotary))
        if kv_cache is not None:
            k, v = kv_cache.append(self.layer, k, v)  # [batch, past + pos, kv_head, d_head]
        z = self._explicit(q, k, v, mask) if self.explicit else self._fused(q, k, v, mask)
        z = self.hook_z(z)  # [batch, pos, head, d_head]
        if self.hook_result.active:
            result = self.hook_result(
                torch.einsum("bphe,hed->bphd", z, self.W_O)
            )  # [batch, pos, head, d_model]
            out = result.sum(dim=2)
        else:
            out = z.reshape(*z.shape[:2], -1) @ merge_heads_out(self.W_O)  # [batch, pos, d_model]
        return out + self.b_O if self.b_O is not None else out

    def _project(
        self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, norm: InputNorm | None = None
    ) -> torch.Tensor:
        if x.ndim == 4:  # one input stream per head: [batch, pos, head, d_model]
            out = project_heads(None if norm is None else norm.module, x, w)  # [batch, pos, head, d_head]
            return out + b if b is not None else out
        flat = F.linear(
            x, merge_heads_in(w).T, None if b is None else b.reshape(-1)
        )  # [batch, pos, head * e]
        return flat.unflatten(-1, (w.shape[0], w.shape[2]))  # [batch, pos, head, d_head]

    def _fused(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: LayerMask) -> torch.Tensor:
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [batch, head, pos, d_head]
        kwargs = {}
        if self.cfg.group_size > 1:
            if _SDPA_HAS_GQA:
                kwargs["enable_gqa"] = True
            else:
                k = k.repeat_interleave(self.cfg.group_size, dim=1)
                v = v.repeat_interleave(self.cfg.group_size, dim=1)
        z = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask.allowed, is_causal=mask.is_causal, scale=self.scale, **kwargs
        )
        return z.transpose(1, 2)  # [batch, pos, head, d_head]

    def _explicit(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: LayerMask) -> torch.Tensor:
        batch, n_q, n_heads, d_head = q.shape
        g, r = self.cfg.n_kv_heads, self.cfg.group_size
        # Query heads that share a key/value head are stacked along the query axis, so one batched matmul
        # serves the whole group without copying keys: [batch, kv_head, group * query, d_head].
        q_grouped = q.unflatten(2, (g, r)).permute(0, 2, 3, 1, 4).reshape(batch, g, r * n_q, d_head)
        q_grouped = q_grouped * self.scale  # scaling q is cheaper than scaling the scores
        scores = q_grouped @ k.permute(0, 2, 3, 1)  # [batch, kv_head, group * query, key]
        scores = scores.view(batch, n_heads, n_q, -1)  # [batch, head, query, key]
        if self.softcap is not None:
            scores = torch.tanh(scores / self.softcap) * self.softcap
        allowed = mask.dense(n_q, scores.shape[-1], scores.device)
        if allowed is not None:
            scores.masked_fill_(~allowed, float("-inf"))
        scores = self.hook_attn_scores(scores)
        if self.sinks is None:
            pattern = scores.softmax(dim=-1, dtype=torch.float32)
        else:  # the sink is one more key per row; its share of the softmax is dropped with it
            sink = (
                self.sinks.to(scores.dtype).view(1, -1, 1, 1).expand(batch, -1, n_q, 1)
            )  # [batch, head, query, 1]
            pattern = torch.cat([scores, sink], dim=-1).softmax(dim=-1, dtype=torch.float32)[..., :-1]
        pattern = self.hook_pattern(pattern.to(q.dtype))
        z = pattern.reshape(batch, g, r * n_q, -1) @ v.transpose(
            1, 2
        )  # [batch, kv_head, group * query, d_head]
        return z.view(batch, g, r, n_q, d_head).permute(0, 3, 1, 2, 4).reshape(batch, n_q, n_heads, d_head)
