"""``transformer_lens.evals``: the induction loss, the one evaluation the demos call without a data set."""

from __future__ import annotations

from typing import Any

import torch


def induction_loss(
    model: Any,
    tokenizer: Any = None,
    batch_size: int = 4,
    subseq_len: int = 384,
    prepend_bos: bool | None = None,
    device: str | torch.device | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """Mean next-token loss on the second copy of random token sequences repeated twice.

    Tokens are drawn uniformly from ids 100 to 20000 (fewer in a smaller vocabulary) with a fixed ``seed``; a
    model with induction heads predicts the second copy well. With ``prepend_bos`` (default: the tokenizer's
    habit) each row starts with BOS.
    """
    vocab = model.cfg.d_vocab
    low, high = min(100, vocab - 1), min(20000, vocab)
    if subseq_len * 2 + 1 > model.cfg.n_ctx:
        subseq_len = (model.cfg.n_ctx - 1) // 2
    generator = torch.Generator().manual_seed(seed)
    first = torch.randint(low, high, (batch_size, subseq_len), generator=generator)  # [batch, pos]
    tokens = torch.cat([first, first], dim=1)  # [batch, 2 * pos]
    bos = model.tokenizer.bos_id if model.tokenizer is not None else None
    if (prepend_bos if prepend_bos is not None else model.cfg.default_prepend_bos) and bos is not None:
        tokens = torch.cat([torch.full((batch_size, 1), bos), tokens], dim=1)
    tokens = tokens.to(device if device is not None else model.device)
    per_token = model.loss_fn(model(tokens), tokens, per_token=True)  # [batch, pos - 1]
    return per_token[:, -subseq_len + 1 :].mean()
