"""A transformer block: attention then MLP, each added to the residual stream.

Pre-norm (GPT-2, Llama): ``resid_mid = resid_pre + Attn(LN1(resid_pre))``,
``resid_post = resid_mid + MLP(LN2(resid_mid))``.
Post-norm (the original transformer, BERT): ``resid_mid = LN1(resid_pre + Attn(resid_pre))``,
``resid_post = LN2(resid_mid + MLP(resid_mid))``.
"""

from __future__ import annotations

import torch
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig
from interp.model.attention import Attention
from interp.model.mlp import MLP
from interp.model.norm import Norm


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm_placement == "pre"
        # Registered in the order the forward pass reaches them, which is the order of hook_names().
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.ln1 = Norm(cfg)
        self.attn = Attention(cfg)
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        self.ln2 = Norm(cfg)
        self.mlp = MLP(cfg)
        self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, rotary=None) -> torch.Tensor:
        resid_pre = self.hook_resid_pre(x)
        if self.pre_norm:
            attn_out = self.hook_attn_out(self.attn(self.ln1(resid_pre), mask, rotary))
            resid_mid = self.hook_resid_mid(resid_pre + attn_out)
            mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_mid)))
            return self.hook_resid_post(resid_mid + mlp_out)
        attn_out = self.hook_attn_out(self.attn(resid_pre, mask, rotary))
        resid_mid = self.hook_resid_mid(self.ln1(resid_pre + attn_out))
        mlp_out = self.hook_mlp_out(self.mlp(resid_mid))
        return self.hook_resid_post(self.ln2(resid_mid + mlp_out))
