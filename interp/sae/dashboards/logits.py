"""The tokens a feature's decoder row promotes and suppresses directly: the row through the unembedding.

The row is taken through the final norm as a linear map at unit scale (centred for a LayerNorm, times the
norm's gain), then through ``W_U``: the direct effect on the logits of adding the row to the last residual
stream, up to the norm's scale, which is the same for every token.

Which row: the decoder row into the *last* layer a feature writes: an SAE's or a per-layer transcoder's only
row, a cross-layer transcoder's row into the model's last layer (see ``docs/dashboards.md`` for why), and only
where that row lies in the residual stream's space.
"""

from __future__ import annotations

from typing import Any

import torch

from interp.dictionary import SparseDictionary
from interp.sae.dashboards.reading import fixed_rows

CHUNK = 256
"""Features per ``[features, d_vocab]`` product, bounding its memory."""

STREAM_SPACE = (
    "hook_resid_pre",
    "hook_resid_mid",
    "hook_resid_post",
    "hook_attn_out",
    "hook_mlp_out",
    "hook_normalized",
    "hook_embed",
    "hook_pos_embed",
    "hook_in",
)
"""Hooks whose tensors are vectors of the residual stream's space (``[..., d_model]``), so a decoder row written
there can be read by the unembedding; a row written to ``hook_z`` or an MLP's hidden layer cannot."""


def output_hook(dictionary: SparseDictionary, layer: int) -> str:
    """The hook written by the row :func:`logit_rows` reads: at the last layer the features of ``layer`` write."""
    return dictionary.output_hook(dictionary.output_layers(layer)[-1])


def logit_rows(dictionary: SparseDictionary, layer: int, features: torch.Tensor) -> torch.Tensor | None:
    """``[n, d]``: what one unit of each of ``features`` writes into the last layer it writes; ``None`` where
    that write is not a vector of the residual stream (an SAE at ``hook_z``) or is not fixed (an SAE that
    normalises each input has no decoder row apart from its input)."""
    if output_hook(dictionary, layer).rsplit(".", 1)[-1] not in STREAM_SPACE:
        return None
    rows = fixed_rows(dictionary.decoder, layer, features)
    return None if rows is None else rows[:, -1]  # [n, d_model]


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
