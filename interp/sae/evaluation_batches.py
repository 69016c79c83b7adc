"""The language-model side of evaluating a dictionary: batches of tokens and next-token losses.

Shared by SAE and transcoder evaluation.
"""

from __future__ import annotations

from typing import Any

import torch


def lm_batches(model: Any, tokens: Any, attention_mask: torch.Tensor | None, batch_size: int):
    """``(ids, mask)`` batches on the model's device, from text, token ids, ``Tokens`` or ready batches."""
    if isinstance(tokens, list) and tokens and isinstance(tokens[0], tuple):  # batches (ids, mask) already
        for ids, mask in tokens:
            yield ids.to(model.device), mask.to(model.device)
        return
    if isinstance(tokens, (str, list)) and (isinstance(tokens, str) or isinstance(tokens[0], str)):
        tokens = model.to_tokens(tokens)
    if hasattr(tokens, "ids") and hasattr(tokens, "mask"):
        tokens, attention_mask = tokens.ids, tokens.mask
    if tokens.ndim == 1:
        tokens = tokens[None]
    mask = torch.ones_like(tokens) if attention_mask is None else attention_mask.reshape(tokens.shape)
    for start in range(0, tokens.shape[0], batch_size):
        yield (
            tokens[start : start + batch_size].to(model.device),
            mask[start : start + batch_size].to(model.device),
        )


def ce_and_logprobs(logits: torch.Tensor, ids: torch.Tensor, pairs: torch.Tensor):
    """Next-token NLL and log-probabilities at the ``pairs`` positions ``[batch, pos - 1]`` with a next token."""
    logp = logits[:, :-1].float().log_softmax(-1)[pairs]  # [n, d_vocab] at positions with a next real token
    nll = -logp.gather(-1, ids[:, 1:][pairs][:, None]).squeeze(-1)
    return nll, logp
