"""The next token before and after an edit (steering, an intervention on a graph's features), as the pages show it:
the likeliest tokens each way, and the tokens whose logits the edit raised and lowered most."""

from __future__ import annotations

from typing import Any

import torch


def next_token_changes(tokenizer: Any, before: torch.Tensor, after: torch.Tensor, k: int) -> dict[str, Any]:
    """From the logits ``[d_vocab]`` at the last position without and with the edit: ``before`` and ``after``,
    the ``k`` likeliest tokens each (``id``, ``token``, ``logit``, ``prob``); ``raised`` and ``lowered``, the ``k``
    tokens whose logit moved most up and down (``before``, ``after``, ``change``: logits)."""
    before, after = before.detach().float().cpu(), after.detach().float().cpu()
    probs = before.softmax(-1), after.softmax(-1)
    k = min(k, before.shape[-1])

    def token(i: int) -> str:
        return tokenizer.decode([i]) if tokenizer is not None else str(i)

    def likeliest(p: torch.Tensor, logits: torch.Tensor) -> list[dict[str, Any]]:
        values, ids = p.topk(k)
        return [
            {"id": i, "token": token(i), "logit": float(logits[i]), "prob": float(v)}
            for v, i in zip(values.tolist(), ids.tolist(), strict=True)
        ]

    change = after - before  # [d_vocab]

    def moved(sign: float) -> list[dict[str, Any]]:
        ids = (sign * change).topk(k).indices.tolist()
        return [
            {
                "id": i,
                "token": token(i),
                "before": float(before[i]),
                "after": float(after[i]),
                "change": float(change[i]),
            }
            for i in ids
        ]

    return {
        "before": likeliest(probs[0], before),
        "after": likeliest(probs[1], after),
        "raised": moved(1.0),
        "lowered": moved(-1.0),
    }
