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
    """Token embeddings, multiplied by ``cfg.embed_scale`` where the family scales them (Gemma: by
    ``sqrt(d_model)``, rounded to the model's dtype first, as the reference implementation does)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))
        self.scale = cfg.embed_scale

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = F.embedding(tokens, self.W_E)  # [batch, pos, d_model]
        if self.scale != 1.0:
            x = x * torch.tensor(self.scale, dtype=torch.float32, device=x.device).to(x.dtype)
        return x


class Unembed(nn.Module):
    """Logits ``x @ W_U + b_U``; with tied embeddings ``W_U`` is a view of ``embed.W_E`` transposed (not a
    parameter of its own, so the state dict lists the matrix once; :meth:`untie` gives it its own copy).

    With ``cfg.logit_softcap`` (Gemma 2) the logits become ``cap * tanh(logits / cap)`` before ``hook_out``, so
    the hook holds the logits the model outputs, the ones to patch and compare against.
    """

    def __init__(self, cfg: TransformerConfig, embed: Embed) -> None:
        super().__init__()
        self._embed = (embed,)  # a plain reference, so the tied weight is not listed twice
        self.tied = cfg.tie_embeddings
        if not self.tied:  # registered directly: W_U is also a property of the class (see below)
            self._parameters["W_U"] = param_in_layout((cfg.d_model, cfg.d_vocab), (1, 0))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab))
        self.softcap = cfg.logit_softcap
        self.hook_in = HookPoint()  # [batch, pos, d_model]
        self.hook_out = HookPoint()  # [batch, pos, d_vocab]

    @property
    def W_U(self) -> torch.Tensor:
        """``[d_model, d_vocab]``: the parameter, or with tied embeddings a view of ``embed.W_E`` transposed."""
        return self._embed[0].W_E.T if self.tied else self._parameters["W_U"]

    weight = W_U

    def untie(self) -> None:
        """Give ``W_U`` its own parameter, a copy of the tied matrix, so it can change without ``W_E``."""
        if self.tied:
            w_u = param_in_layout(tuple(self.weight.shape), (1, 0))
            w_u.data.copy_(self.weight.detach())
            self.tied = False
            self._parameters["W_U"] = w_u

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = F.linear(self.hook_in(x), self.weight.T, self.b_U)  # [batch, pos, d_vocab]
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return self.hook_out(logits)


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
