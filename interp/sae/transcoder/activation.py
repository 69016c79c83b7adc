"""The activation functions of transcoders, as circuit-tracer and Gemma Scope define them.

``relu`` is ``max(pre, 0)``; ``jumprelu`` keeps a pre-activation where it exceeds its feature's threshold,
``pre * (pre > threshold)`` (no ReLU: with a positive threshold the two agree); ``topk`` keeps each token's
``k`` largest pre-activations as they are (circuit-tracer's ``TopK``: the kept values are not ReLU'd);
``batchtopk`` keeps the ``k * n_tokens`` largest pre-activations over every token of the call, so ``k`` is
the mean number of active features per token.
"""

from __future__ import annotations

from typing import Literal

import torch

Activation = Literal["relu", "jumprelu", "topk", "batchtopk"]
ACTIVATIONS = ("relu", "jumprelu", "topk", "batchtopk")


def check_activation(activation: str, k: int | None, has_threshold: bool) -> None:
    """Raise one clear line when an activation, its ``k`` or its threshold does not fit."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r}; expected one of {list(ACTIVATIONS)}")
    if activation in ("topk", "batchtopk"):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"a {activation} transcoder needs k >= 1 features per token, got k={k!r}")
    elif k is not None:
        raise ValueError(f"k={k!r} is for topk and batchtopk; a {activation} transcoder takes k=None")
    if (activation == "jumprelu") != has_threshold:
        need = (
            "needs a threshold [d_transcoder] per layer" if activation == "jumprelu" else "has no threshold"
        )
        raise ValueError(f"a {activation} transcoder {need}")


def activate(
    pre: torch.Tensor, activation: str, k: int | None = None, threshold: torch.Tensor | None = None
) -> torch.Tensor:
    """Feature activations ``[..., d_transcoder]`` from pre-activations of the same shape."""
    if activation == "relu":
        return pre.relu()
    if activation == "jumprelu":
        return pre * (pre > threshold).to(pre.dtype)
    if activation == "topk":
        indices = pre.topk(k, dim=-1, sorted=False).indices
        return pre * torch.zeros_like(pre).scatter(-1, indices, 1.0)
    flat = pre.reshape(-1)  # [tokens * d_transcoder]
    n_keep = min(k * (flat.numel() // pre.shape[-1]), flat.numel())
    indices = flat.topk(n_keep, sorted=False).indices
    return (flat * torch.zeros_like(flat).scatter(0, indices, 1.0)).reshape(pre.shape)
