"""Training's forms of the activations, and the AuxK loss: what every kind of dictionary's step shares.

- :class:`JumpReLU` and :class:`Step`: ``x * (x > threshold)`` and ``x > threshold``, whose threshold gets a
  gradient through a rectangle kernel of width ``bandwidth`` (a straight-through estimator of the step's
  derivative, Rajamanoharan et al. 2024); both conventions of JumpReLU agree here, since trained thresholds
  are ``exp(log_threshold) > 0``;
- :func:`batch_top_k`: BatchTopK while training, the ``k * rows`` largest of the whole batch (across ranks);
- :func:`aux_k`: the AuxK loss (Gao et al. 2024), the strongest dead latents predicting the residual.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from interp import distributed
from interp.sae.activation import jump_relu
from interp.sae.latents import Active


def _rectangle(x: torch.Tensor) -> torch.Tensor:
    return ((x > -0.5) & (x < 0.5)).to(x.dtype)


class JumpReLU(torch.autograd.Function):
    """``x * (x > threshold)``; the threshold's gradient through a rectangle kernel of width ``bandwidth``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
        ctx.save_for_backward(x, threshold)
        ctx.bandwidth = bandwidth
        # Trained thresholds are exp(log_threshold) > 0, where both conventions of JumpReLU agree.
        return jump_relu(x, threshold, rectify=False)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):
        x, threshold = ctx.saved_tensors
        bw = ctx.bandwidth
        x_grad = (x > threshold).to(x.dtype) * grad
        t_grad = -(threshold / bw) * _rectangle((x - threshold) / bw) * grad
        return x_grad, t_grad.reshape(-1, threshold.shape[-1]).sum(0), None


class Step(torch.autograd.Function):
    """``x > threshold`` as 0/1; the threshold's gradient through the same rectangle kernel."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, threshold: torch.Tensor, bandwidth: float) -> torch.Tensor:
        ctx.save_for_backward(x, threshold)
        ctx.bandwidth = bandwidth
        return (x > threshold).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):
        x, threshold = ctx.saved_tensors
        bw = ctx.bandwidth
        t_grad = -(1.0 / bw) * _rectangle((x - threshold) / bw) * grad
        return None, t_grad.reshape(-1, threshold.shape[-1]).sum(0), None


def batch_top_k(relu: torch.Tensor, k: int, global_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """BatchTopK while training (SAEs and transcoders alike): ``(acts, threshold)``, where ``acts`` keeps the
    ReLU'd pre-activations ``relu`` ``[rows, d]`` that reach ``threshold``, the ``k * global_rows``-th largest
    of the whole batch (every rank's rows)."""
    threshold = batch_threshold(relu, k, global_rows)
    return relu * (relu >= threshold).to(relu.dtype), threshold


def batch_threshold(acts: torch.Tensor, k: int, global_rows: int) -> torch.Tensor:
    """The ``k * global_rows``-th largest value of ``acts`` over the whole batch (every rank's rows)."""
    want = k * global_rows
    flat = acts.detach().flatten()
    local = flat.topk(min(want, flat.numel())).values
    if distributed.is_distributed():
        padded = torch.full((want,), -math.inf, dtype=local.dtype)
        padded[: local.numel()] = local
        parts = [torch.empty_like(padded) for _ in range(distributed.world_size())]
        dist.all_gather(parts, padded)
        local = torch.cat(parts)
    return local.topk(min(want, local.numel())).values[-1]


def aux_k(
    pre: torch.Tensor,
    dead: torch.Tensor,
    values_of: Callable[[torch.Tensor], torch.Tensor],
    decoder: torch.Tensor,
    error: torch.Tensor,
    k_aux: int,
) -> torch.Tensor:
    """The AuxK loss before its denominator: the ``k_aux`` strongest dead latents of each row (``pre [rows,
    d]``, ``dead [d]``) predict the residual ``error [rows, d_out]`` through ``decoder [d, d_out]``, scaled down
    when fewer latents are dead; ``values_of(latents [rows, m])`` gives their pre-activations with a gradient."""
    n_dead = int(dead.sum())
    if n_dead == 0:
        return pre.new_zeros(())
    with torch.no_grad():  # the top-k over the dead latents' columns alone
        dead_latents = dead.nonzero()[:, 0]
        among = pre.index_select(-1, dead_latents).topk(min(k_aux, n_dead), dim=-1, sorted=False).indices
        chosen = dead_latents[among]  # [rows, m]
    # [rows, d_out]: the dead latents' guess at the residual, a weighted sum of their decoder rows
    guess = Active(values_of(chosen).relu(), chosen).decode(decoder)
    return min(n_dead / k_aux, 1.0) * (guess + error.detach()).pow(2).sum()
