"""The two models compared: an LSTM and a one-layer transformer of similar size, and their symbol logits."""

from __future__ import annotations

import torch
from torch import nn

from interp import HookedTransformer, TransformerConfig
from studies.recurrence.config import RecurrenceConfig


class LSTMModel(nn.Module):
    """Embedding, one LSTM layer, a read-out of the last state; ``embed_hook`` sees the embeddings."""

    def __init__(self, cfg: RecurrenceConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.lstm = nn.LSTM(cfg.d_model, cfg.d_hidden, batch_first=True)
        self.out = nn.Linear(cfg.d_hidden, cfg.n_symbols)

    def forward(self, tokens: torch.Tensor, embed_hook=None) -> torch.Tensor:
        x = self.embed(tokens)  # [batch, pos, d_model]
        if embed_hook is not None:
            embed_hook(x)
        h, _ = self.lstm(x)  # [batch, pos, d_hidden]
        return self.out(h[:, -1])  # [batch, n_symbols]


def make_transformer(cfg: RecurrenceConfig, n_ctx: int, seed: int) -> HookedTransformer:
    """A one-layer, two-head transformer of width ``d_model`` with sinusoidal positions."""
    tcfg = TransformerConfig(
        n_layers=1,
        d_model=cfg.d_model,
        n_heads=2,
        d_vocab=cfg.d_vocab,
        n_ctx=n_ctx,
        positional="sinusoidal",
        seed=seed,
    )
    return HookedTransformer(tcfg)


def transformer_logits(model: HookedTransformer, tokens: torch.Tensor, embed_hook=None) -> torch.Tensor:
    """Logits at the query (last) position, ``[batch, d_vocab]``."""
    hooks = [] if embed_hook is None else [("hook_embed", lambda x, hook: embed_hook(x))]
    logits = model.run_with_hooks(tokens, fwd_hooks=hooks)  # [batch, pos, d_vocab]
    return logits[:, -1]  # [batch, d_vocab]


def logits_of(model: nn.Module, tokens: torch.Tensor, n_symbols: int, embed_hook=None) -> torch.Tensor:
    """Symbol logits ``[batch, n_symbols]`` of either model; the transformer's are cut to the symbols."""
    if isinstance(model, HookedTransformer):
        return transformer_logits(model, tokens, embed_hook)[:, :n_symbols]
    return model(tokens, embed_hook)
