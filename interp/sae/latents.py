"""Latents: the code an SAE's encoder hands its decoder, dense or as TopK's k active latents.

A TopK code has ``k`` active latents per token out of ``d_sae``. Decoding it as a dense
``[..., d_sae] @ [d_sae, d_out]`` product multiplies almost only zeros (``k = 32`` of 4096: 99% of the work),
and forming the dense code costs a pass over ``[..., d_sae]`` of its own. So a TopK code is kept as its values
and indices and decoded as a weighted sum of ``k`` decoder rows (an embedding bag, as training does); the
dense tensor is formed only when something reads it (``encode``, a hook on ``hook_sae_acts_post``). The sum
is the dense product's to float tolerance, not bit for bit: the terms are added in another order.

:class:`Latents` holds what is known of a code: the dense tensor, the active latents, or both when they
describe the same code. The active latents are dropped as soon as a hook edits the dense tensor, or when a
gradient must reach it (someone hooked it while autograd records), so decoding then reads the dense tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from hooks import HookPoint


@dataclass(frozen=True)
class Active:
    """TopK's active latents: ``values`` and ``indices`` ``[..., k]`` (:func:`interp.sae.activation.top_k`)."""

    values: torch.Tensor
    indices: torch.Tensor

    def to_dense(self, d_sae: int) -> torch.Tensor:
        """The dense code ``[..., d_sae]``: the values at their indices, zeros elsewhere."""
        zeros = self.values.new_zeros(*self.values.shape[:-1], d_sae)
        return zeros.scatter_(-1, self.indices, self.values)  # in place: no copy of the zeros

    def decode(self, rows: torch.Tensor) -> torch.Tensor:
        """``sum_j values[..., j] * rows[indices[..., j]]``, ``[..., d_out]`` for ``rows`` ``[d_sae, d_out]``."""
        k = self.indices.shape[-1]
        flat = F.embedding_bag(
            self.indices.reshape(-1, k), rows, per_sample_weights=self.values.reshape(-1, k), mode="sum"
        )  # [tokens, d_out]
        return flat.reshape(*self.indices.shape[:-1], rows.shape[-1])


@dataclass(frozen=True)
class Latents:
    """An SAE's code for a batch: ``dense`` ``[..., d_sae]``, ``active`` (TopK), or both, describing the same
    numbers."""

    dense: torch.Tensor | None = None
    active: Active | None = None

    def to_dense(self, d_sae: int) -> torch.Tensor:
        return self.dense if self.dense is not None else self.active.to_dense(d_sae)


@dataclass(frozen=True)
class Code:
    """One layer's features for a batch, as a splice holds them between the input hook and the outputs they
    write: the latents, and what decoding needs of the input (an SAE's normalisation statistics and skip input,
    a transcoder's input for its skip term)."""

    latents: Latents
    context: Any


class Run:
    """One pass through an SAE's hook points (``hooked``) or past them, and what happened on the way.

    Attributes:
        hooked: tensors go through the hook points; otherwise past them (the clean path).
        dense: decode the dense code. Set when the TopK code must be decoded from the dense tensor (a hook
            edited it, or a gradient must reach it); set beforehand, the clean path decodes as a hooked pass
            did, to the same bits.
        edited: a hook changed a tensor: returned another one, or edited the one it was given in place (its
            version counter moved; a tensor made in inference mode keeps none, so any hook counts as an edit
            there). The splice's error term reuses the hooked output as the clean one when nothing changed.
    """

    def __init__(self, *, hooked: bool, dense: bool = False) -> None:
        self.hooked = hooked
        self.dense = dense
        self.edited = False

    def listens(self, point: HookPoint) -> bool:
        """Whether anything at ``point`` would see a tensor passed through it."""
        return self.hooked and not point.idle

    def __call__(self, point: HookPoint, x: torch.Tensor) -> torch.Tensor:
        if not self.listens(point):
            return x
        version = _version(x)
        out = point(x)
        if out is not x or version is None or _version(x) != version:
            self.edited = True
        return out


def _version(x: torch.Tensor) -> int | None:
    """The tensor's in-place version counter; ``None`` where it keeps none (tensors made in inference mode)."""
    try:
        return x._version
    except RuntimeError:
        return None


def through_post(point: HookPoint, active: Active, d_sae: int, run: Run) -> Latents:
    """The TopK code after ``hook_sae_acts_post``: the dense tensor is formed only when something listens
    there (or ``run.dense``), and decoding reads it only if the hook changed it or a gradient must reach it."""
    if not run.listens(point):
        return Latents(dense=active.to_dense(d_sae)) if run.dense else Latents(active=active)
    edited_before, run.edited = run.edited, False
    dense = active.to_dense(d_sae)
    seen = run(point, dense)
    if run.edited or seen.requires_grad:
        run.dense = True
    run.edited = run.edited or edited_before
    return Latents(dense=seen) if run.dense else Latents(dense=seen, active=active)
