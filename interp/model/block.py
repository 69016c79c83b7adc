"""A transformer block: attention then MLP, each added to the residual stream.

Where the norms sit is ``cfg.norm_placement``; what each variant computes, with ``f`` a sublayer:

- ``"pre"`` (GPT-2, Llama): ``resid_mid = resid_pre + Attn(LN1(resid_pre))``, then
  ``resid_post = resid_mid + MLP(LN2(resid_mid))``.
- ``"sandwich"`` (Gemma 2/3): as pre-norm, with a second norm on each sublayer's output before the add:
  ``resid_mid = resid_pre + LN1_post(Attn(LN1(resid_pre)))``.
- ``"output"`` (OLMo 2): no norm before the sublayer, one after it: ``resid_pre + LN1_post(Attn(resid_pre))``.
- ``"post"`` (the original transformer, BERT): ``resid_mid = LN1(resid_pre + Attn(resid_pre))``,
  ``resid_post = LN2(resid_mid + MLP(resid_mid))``.

``hook_attn_out`` and ``hook_mlp_out`` hold what is added to the stream (after the output norm where there is
one), so ``resid_mid = resid_pre + attn_out`` holds in every pre-style block. With ``parallel_attn_mlp``
(GPT-NeoX) both sublayers read ``resid_pre`` and ``resid_post = resid_pre + attn_out + mlp_out``; such blocks
have no ``hook_resid_mid``.

Split inputs (:meth:`Block.split_inputs`, which :meth:`HookedTransformer.split_inputs` turns on for every
block) give each query head, and each key/value head's keys and values, an input stream of its own before the
norm (``hook_q_input [batch, pos, head, d_model]``, ``hook_k_input`` and ``hook_v_input`` ``[batch, pos,
kv_head, d_model]``), and the MLP one (``hook_mlp_in``). Editing one of them changes what that head or the MLP
reads and nothing else, which is what edge-level patching needs. The points exist only while split.
"""

from __future__ import annotations

import torch
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig
from interp.model.attention import Attention
from interp.model.head_norm import InputNorm
from interp.model.kv_cache import KVCache
from interp.model.masks import LayerMask
from interp.model.mlp import MLP
from interp.model.moe import MoE
from interp.model.norm import Norm


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig, layer: int = 0) -> None:
        super().__init__()
        placement = cfg.norm_placement
        self.placement = placement
        self.parallel = cfg.parallel_attn_mlp
        # Registered in the order the forward pass reaches them, which is the order of hook_names().
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        for name in ("hook_q_input", "hook_k_input", "hook_v_input"):
            self.register_module(name, None)  # split inputs: a place in forward order, filled while split
        self.ln1 = Norm(cfg) if placement != "output" else None
        self.attn = Attention(cfg, layer)
        self.ln1_post = Norm(cfg) if placement in ("sandwich", "output") else None
        self.hook_attn_out = HookPoint()
        if not self.parallel:
            self.hook_resid_mid = HookPoint()
        self.register_module("hook_mlp_in", None)
        self.ln2 = Norm(cfg) if placement != "output" else None
        self.mlp = MoE(cfg) if cfg.mlp_types[layer] == "moe" else MLP(cfg)
        self.ln2_post = Norm(cfg) if placement in ("sandwich", "output") else None
        self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()
        self.n_heads, self.n_kv_heads = cfg.n_heads, cfg.n_kv_heads
        self.split = False

    _SPLIT = ("hook_q_input", "hook_k_input", "hook_v_input", "hook_mlp_in")

    def split_inputs(self, on: bool) -> list[str]:
        """Add (``on``) or remove the split-input hook points; returns their names within the block."""
        if on and self.placement == "post":
            raise ValueError(
                "split inputs need the norms before or after the sublayers (pre, sandwich, output); a post-norm "
                "block norms the stream after the add, where no head has an input of its own"
            )
        for name in self._SPLIT:
            self.register_module(name, HookPoint() if on else None)
        self.split = on
        return list(self._SPLIT)

    def forward(
        self,
        x: torch.Tensor,
        mask: LayerMask,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        kv_cache: KVCache | None = None,
    ) -> torch.Tensor:
        resid_pre = self.hook_resid_pre(x)
        if self.placement == "post":
            attn_out = self.hook_attn_out(self.attn(resid_pre, mask, rotary, kv_cache))
            resid_mid = self.hook_resid_mid(self.ln1(resid_pre + attn_out))
            mlp_out = self.hook_mlp_out(self.mlp(resid_mid))
            return self.hook_resid_post(self.ln2(resid_mid + mlp_out))
        if self.split:
            attn_out = self.hook_attn_out(self._split_attention(resid_pre, mask, rotary, kv_cache))
        else:
            attn_out = self.hook_attn_out(
                _around(self.ln1, self.ln1_post, lambda h: self.attn(h, mask, rotary, kv_cache), resid_pre)
            )
        stream = resid_pre if self.parallel else self.hook_resid_mid(resid_pre + attn_out)
        mlp_in = self.hook_mlp_in(stream) if self.split else stream  # an edit here reaches the MLP only
        mlp_out = self.hook_mlp_out(_around(self.ln2, self.ln2_post, self.mlp, mlp_in))
        if self.parallel:
            return self.hook_resid_post(resid_pre + attn_out + mlp_out)
        return self.hook_resid_post(stream + mlp_out)

    def _split_attention(
        self, x: torch.Tensor, mask: LayerMask, rotary, kv_cache: KVCache | None
    ) -> torch.Tensor:
        """Attention with one input stream per query head and per key/value head (before the norm)."""
        heads = x[:, :, None, :]  # [batch, pos, 1, d_model]
        x_q = self.hook_q_input(heads.expand(-1, -1, self.n_heads, -1))  # [batch, pos, head, d_model]
        x_k = self.hook_k_input(heads.expand(-1, -1, self.n_kv_heads, -1))  # [batch, pos, kv_head, d_model]
        x_v = self.hook_v_input(heads.expand(-1, -1, self.n_kv_heads, -1))
        # the norm runs inside the projections: once per position where the heads share a stream
        norm = None if self.ln1 is None else InputNorm(self.ln1)
        out = self.attn(x_q, mask, rotary, kv_cache, x_k=x_k, x_v=x_v, norm=norm)
        return self.ln1_post(out) if self.ln1_post is not None else out


def _around(before: Norm | None, after: Norm | None, sublayer, x: torch.Tensor) -> torch.Tensor:
    """``after(sublayer(before(x)))``, skipping the norms a placement does not have."""
    out = sublayer(before(x) if before is not None else x)
    return after(out) if after is not None else out
