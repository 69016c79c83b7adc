"""Token embedding, the unembedding, and BERT's masked-LM transform."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig
from interp.model.layout import param_in_layout
from interp.model.mlp import ACTIVATIONS
from interp.model.norm import Norm


class Embed(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.W_E)  # [batch, pos, d_model]


class Unembed(nn.Module):
    """Logits ``x @ W_U + b_U``; with tied embeddings ``W_U`` is a view of ``embed.W_E`` transposed."""

    def __init__(self, cfg: TransformerConfig, embed: Embed) -> None:
        super().__init__()
        self._embed = (embed,)  # a plain reference, so the tied weight is not listed twice
        self.W_U = None if cfg.tie_embeddings else param_in_layout((cfg.d_model, cfg.d_vocab), (1, 0))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab))
        self.hook_in = HookPoint()  # [batch, pos, d_model]
        self.hook_out = HookPoint()  # [batch, pos, d_vocab]

    @property
    def weight(self) -> torch.Tensor:
        """``W_U`` as ``[d_model, d_vocab]``, whether tied or not."""
        return self._embed[0].W_E.T if self.W_U is None else self.W_U

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_out(F.linear(self.hook_in(x), self.weight.T, self.b_U))


class MLMHead(nn.Module):
    """BERT's prediction-head transform before the unembedding: ``LN(act(x @ W + b))``."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.W = param_in_layout((cfg.d_model, cfg.d_model), (1, 0))
        self.b = nn.Parameter(torch.zeros(cfg.d_model))
        self.act = ACTIVATIONS[cfg.act]
        self.ln = Norm(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.act(F.linear(x, self.W.T, self.b)))
