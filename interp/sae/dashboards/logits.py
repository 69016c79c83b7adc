"""The tokens a feature's decoder row promotes and suppresses directly: the row through the unembedding.

The row is taken through the final norm as a linear map at unit scale (centred for a LayerNorm, times the
norm's gain), then through ``W_U``: the direct effect on the logits of adding the row to the last residual
stream, up to the norm's scale, which is the same for every token. Which row: see
:func:`~interp.sae.dashboards.dictionary.logit_rows`.
"""

from __future__ import annotations

from typing import Any

import torch

CHUNK = 256
"""Features per ``[features, d_vocab]`` product, bounding its memory."""


@torch.no_grad()
def direct_logits(model: Any, rows: torch.Tensor) -> torch.Tensor:
    """``[n, d_vocab]``: rows ``[n, d_model]`` written to the last residual stream, read by the unembedding."""
    w_u = model.unembed.weight  # [d_model, d_vocab]
    x = rows.to(w_u.device, torch.float32)
    norm = getattr(model, "ln_final", None)
    if norm is not None:
        if norm.kind == "layernorm":
            x = x - x.mean(-1, keepdim=True)
        x = x * norm.gain.to(x.device)
    return x @ w_u.float()


@torch.no_grad()
def top_tokens(model: Any, rows: torch.Tensor | None, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Token ids ``([n, k], [n, k])`` whose logits ``rows`` raise most and lower most, or ``None`` without rows
    or an unembedding."""
    if rows is None or getattr(model, "unembed", None) is None:
        return None
    ups, downs = [], []
    for start in range(0, len(rows), CHUNK):
        logits = direct_logits(model, rows[start : start + CHUNK])  # [chunk, d_vocab]
        k_ = min(k, logits.shape[-1])
        ups.append(logits.topk(k_, dim=-1).indices.cpu())
        downs.append((-logits).topk(k_, dim=-1).indices.cpu())
    return torch.cat(ups), torch.cat(downs)
