"""The activation functions of sparse dictionaries, written once: ReLU, JumpReLU, TopK and BatchTopK.

The libraries that publish dictionaries agree on ReLU and disagree on one detail of JumpReLU and TopK: whether
the values they keep go through a ReLU. It matters only where a kept pre-activation is negative, that is when a
token has fewer than ``k`` positive pre-activations (TopK, BatchTopK) or a threshold is negative (JumpReLU).
What each format's reference code computes:

- SAELens 6 (``JumpReLUSAE.encode``, ``TopK``): JumpReLU is ``relu(pre) * (pre > threshold)``; TopK keeps the
  ``k`` largest pre-activations, then applies a ReLU;
- sparsify 1.3.3 (``fused_encoder``): TopK applies a ReLU, then keeps the ``k`` largest: the same code as
  SAELens's (only the indices of kept zeros may differ);
- Gemma Scope (its reference encode): JumpReLU is ``relu(pre) * (pre > threshold)``;
- circuit-tracer 0.5.0 (``jumprelu``, ``TopK``), also for the Gemma Scope and Gemma Scope 2 transcoders it
  reads: JumpReLU is ``pre * (pre > threshold)``; TopK keeps the ``k`` largest as they are.

``rectify=True`` is SAELens's convention, which sparsify and Gemma Scope share: :class:`~interp.sae.SAE` follows
it (it reads those three formats). ``rectify=False`` is circuit-tracer's: the transcoders follow it
(:class:`~interp.sae.TranscoderSet` and :class:`~interp.sae.CrossLayerTranscoder`, read from circuit-tracer's
and Gemma Scope 2's formats). Where every threshold is positive, as training makes them, the two JumpReLUs
agree. BatchTopK keeps the ``k * n_tokens`` largest pre-activations over every token of a call, so ``k`` is
the mean number of active features per token; an SAE trained with it runs at inference as a JumpReLU with the
threshold learned in training, as SAELens runs it. Training's own forms (the straight-through JumpReLU, a batch
threshold taken across ranks) are in :mod:`interp.sae.training.step` and call these.
"""

from __future__ import annotations

from typing import Literal

import torch

from interp.sae.latents import Active

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


def jump_relu(pre: torch.Tensor, threshold: torch.Tensor, *, rectify: bool) -> torch.Tensor:
    """Pre-activations where they exceed their feature's ``threshold`` (through a ReLU if ``rectify``), else 0."""
    kept = pre.relu() if rectify else pre
    return kept * (pre > threshold).to(pre.dtype)


def top_k(pre: torch.Tensor, k: int, *, rectify: bool) -> Active:
    """The ``k`` largest pre-activations ``[..., d]`` of each token (through a ReLU if ``rectify``), as the
    active latents' values and indices ``[..., k]``."""
    values, indices = pre.topk(k, dim=-1, sorted=False)
    return Active(values.relu() if rectify else values, indices)


def batch_top_k(pre: torch.Tensor, k: int, *, rectify: bool) -> torch.Tensor:
    """The ``k * n_tokens`` largest of all pre-activations ``[..., d]`` of the call (through a ReLU if
    ``rectify``), zeros elsewhere."""
    flat = (pre.relu() if rectify else pre).reshape(-1)  # [tokens * d]
    n_keep = min(k * (flat.numel() // pre.shape[-1]), flat.numel())
    indices = flat.topk(n_keep, sorted=False).indices
    return (flat * torch.zeros_like(flat).scatter(0, indices, 1.0)).reshape(pre.shape)


def activate(
    pre: torch.Tensor,
    activation: str,
    *,
    rectify: bool,
    k: int | None = None,
    threshold: torch.Tensor | None = None,
) -> torch.Tensor:
    """Activations ``[..., d]`` from pre-activations of the same shape (see the module docstring).

    Args:
        pre: pre-activations.
        activation: ``relu``, ``jumprelu``, ``topk`` or ``batchtopk``.
        rectify: whether the values JumpReLU, TopK and BatchTopK keep go through a ReLU.
        k: features per token for ``topk`` and ``batchtopk`` (a mean for ``batchtopk``).
        threshold: ``[d]`` for ``jumprelu``.
    """
    if activation == "relu":
        return pre.relu()
    if activation == "jumprelu":
        return jump_relu(pre, threshold, rectify=rectify)
    if activation == "topk":
        return top_k(pre, k, rectify=rectify).to_dense(pre.shape[-1])
    if activation == "batchtopk":
        return batch_top_k(pre, k, rectify=rectify)
    raise ValueError(f"activation={activation!r}; expected one of {list(ACTIVATIONS)}")
