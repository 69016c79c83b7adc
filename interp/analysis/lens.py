"""The residual stream layer by layer, and the logit lens: what each layer's stream would predict.

The logit lens (nostalgebraist, 2020) reads an intermediate stream with the model's own output path: the
final norm (with the scale that stream itself has, not the one the final stream had) and the unembedding.
For post-norm models the stream is already normalised, so only the head and the unembedding apply.
"""

from __future__ import annotations

import pandas as pd
import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import check_index, require_hooks
from interp.analysis.norms import apply_norm


def accumulated_names(n_layers: int, *, incl_mid: bool = False) -> list[str]:
    """Hooks :func:`accumulated_resid` reads: each ``resid_pre`` (and ``resid_mid``), last ``resid_post``."""
    names = []
    for layer in range(n_layers):
        names.append(f"blocks.{layer}.hook_resid_pre")
        if incl_mid:
            names.append(f"blocks.{layer}.hook_resid_mid")
    return names + [f"blocks.{n_layers - 1}.hook_resid_post"]


def accumulated_resid(cache: ActivationCache, *, incl_mid: bool = False) -> tuple[list[str], torch.Tensor]:
    """The stream entering each block and the final stream: ``(labels, [stream, batch, pos, d_model])``.

    Labels are ``L0_pre``, (``L0_mid``,) ..., ``final``.
    """
    if cache.n_layers is None:
        raise ValueError("this cache does not know the number of layers; build it with model.run_with_cache")
    names = accumulated_names(cache.n_layers, incl_mid=incl_mid)
    require_hooks(cache, names, "accumulated_resid", "names_filter='blocks.*.hook_resid_*'")
    labels = [f"L{n.split('.')[1]}_{n.rsplit('_', 1)[1]}" for n in names[:-1]] + ["final"]
    return labels, torch.stack([cache[n] for n in names])  # [stream, batch, pos, d_model]


def unembed_stream(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Logits from a stream ``[..., d_model]`` through the output path (final norm with its own scale, and the
    logit soft-cap where the model has one)."""
    if model.unembed is None:
        raise ValueError("this model has no unembedding (lm_head='none'), so there are no logits to read")
    x = x.to(model.device)
    if model.ln_final is not None:
        x = apply_norm(model, model.ln_final, x)
    x = x.to(model.dtype)
    if model.head is not None:
        x = model.head(x)
    logits = x @ model.unembed.weight + model.unembed.b_U  # [..., d_vocab]
    cap = model.cfg.logit_softcap
    return torch.tanh(logits / cap) * cap if cap is not None else logits


def _at_position(x: torch.Tensor, position: int | torch.Tensor) -> torch.Tensor:
    """``x [stream, batch, pos, d]`` at an int position or a ``[batch]`` of them -> ``[stream, batch, d]``."""
    n_pos = x.shape[2]
    if isinstance(position, torch.Tensor) and position.ndim == 1:
        if position.shape[0] != x.shape[1]:
            raise ValueError(
                f"position has {position.shape[0]} entries; give one per batch row ({x.shape[1]})"
            )
        idx = torch.tensor(
            [check_index(p, n_pos, "position", f"a sequence of {n_pos} tokens") for p in position]
        )
        return x[:, torch.arange(x.shape[1]), idx.to(x.device)]
    return x[:, :, check_index(position, n_pos, "position", f"a sequence of {n_pos} tokens")]


@torch.no_grad()
def logit_lens(
    model: nn.Module, cache: ActivationCache, position: int | torch.Tensor, *, incl_mid: bool = False
) -> tuple[list[str], torch.Tensor]:
    """Logits that each layer's stream at ``position`` would give: ``(labels, [stream, batch, d_vocab])``.

    The ``final`` row equals the model's logits at that position.

    Args:
        position: an index, or a ``[batch]`` tensor of indices (e.g. the last real token of each row).
    """
    if incl_mid and model.cfg.parallel_attn_mlp:
        raise ValueError("parallel blocks have no resid_mid; call logit_lens with incl_mid=False")
    labels, streams = accumulated_resid(cache, incl_mid=incl_mid)
    return labels, unembed_stream(model, _at_position(streams, position))


@torch.no_grad()
def logit_lens_top(
    model: nn.Module,
    cache: ActivationCache,
    position: int | torch.Tensor,
    k: int = 5,
    *,
    incl_mid: bool = False,
) -> pd.DataFrame:
    """The ``k`` most likely tokens per stream and row: columns ``stream, batch, rank, token, logit, prob``
    (and ``token_str`` when the model has a tokenizer)."""
    labels, logits = logit_lens(model, cache, position, incl_mid=incl_mid)
    probs = logits.float().softmax(-1)
    top = probs.topk(k, dim=-1)  # [stream, batch, k]
    rows = []
    for s, label in enumerate(labels):
        for b in range(logits.shape[1]):
            for r in range(k):
                token = int(top.indices[s, b, r])
                rows.append((label, b, r, token, float(logits[s, b, token]), float(top.values[s, b, r])))
    frame = pd.DataFrame(rows, columns=["stream", "batch", "rank", "token", "logit", "prob"])
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and hasattr(tokenizer, "decode"):
        frame["token_str"] = [tokenizer.decode([t]) for t in frame["token"]]
    return frame
