"""One training step's loss, as a module that DistributedDataParallel can wrap.

The reconstruction loss is the squared error summed over features and rows, divided by the global batch and
by the data's variance per row (measured once at initialisation), so it reads as a fraction of variance
unexplained and splits exactly across ranks: each rank returns its rows' share times the world size, and DDP's
gradient average gives the gradient of the whole batch. The sparsity terms depend on the architecture:

- ``topk`` and ``batchtopk``: the AuxK loss (Gao et al. 2024): the ``d_in / 2`` strongest dead latents
  reconstruct the residual the live ones leave, scaled down when fewer latents are dead, weight
  ``aux_coefficient``. BatchTopK keeps the ``k * batch`` largest activations of the whole batch (across ranks);
- ``standard``: L1 of the activations weighted by decoder norms, weight ``l1_coefficient``;
- ``jumprelu``: L0 through a straight-through estimator of the step's derivative (Rajamanoharan et al.
  2024), with a learned log-threshold; weight ``l0_coefficient``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from interp import distributed
from interp.sae.activation import jump_relu, top_k
from interp.sae.latents import Active
from interp.sae.module import SAE
from interp.sae.training.selected import selected_pre_acts


def _rectangle(x: torch.Tensor) -> torch.Tensor:
    return ((x > -0.5) & (x < 0.5)).to(x.dtype)


class _JumpReLU(torch.autograd.Function):
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


class _Step(torch.autograd.Function):
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


class TrainingStep(nn.Module):
    """The SAE being trained plus what only training needs (JumpReLU's log-threshold)."""

    def __init__(self, sae: SAE, settings: Any, variance: float) -> None:
        super().__init__()
        self.sae = sae
        self.s = settings
        self.variance = variance
        if sae.cfg.architecture == "jumprelu":
            init = torch.full((sae.d_sae,), math.log(settings.jumprelu_init_threshold))
            self.log_threshold = nn.Parameter(init.to(sae.dtype))

    def trained_parameters(self) -> list[nn.Parameter]:
        sae = self.sae
        params = [sae.W_enc, sae.b_enc, sae.W_dec, sae.b_dec]
        return params + ([self.log_threshold] if hasattr(self, "log_threshold") else [])

    def forward(self, x: torch.Tensor, dead: torch.Tensor, global_rows: int) -> dict[str, torch.Tensor]:
        sae, s = self.sae, self.s
        arch = sae.cfg.architecture
        denom = global_rows * self.variance / distributed.world_size()
        out: dict[str, torch.Tensor] = {}
        if arch == "topk":
            return self._topk(x, dead, denom)
        pre = sae.pre_acts(x)  # [rows, d_sae]
        if arch == "batchtopk":
            acts, threshold = batch_top_k(pre.relu(), sae.cfg.k, global_rows)
            out["batch_threshold"] = threshold.detach()
        elif arch == "jumprelu":
            acts = _JumpReLU.apply(pre, self.log_threshold.exp(), s.jumprelu_bandwidth)
        else:
            acts = pre.relu()
        recons = acts @ sae.W_dec + sae.b_dec  # [rows, d_in]
        on = acts > 0
        if arch == "batchtopk":
            aux_values = lambda chosen: pre.gather(-1, chosen)  # noqa: E731
            return self._finish(out, pre, recons - x, dead, denom, on.any(0), on.sum(), aux_values)
        error = recons - x
        mse = error.pow(2).sum() / denom
        loss = mse
        if arch == "standard":
            l1 = (acts * sae.W_dec.norm(dim=1)).sum() / (denom / self.variance)
            out["l1"] = l1.detach()
            loss = loss + s.l1_coefficient * l1
        else:
            l0 = _Step.apply(pre, self.log_threshold.exp(), s.jumprelu_bandwidth).sum() / (
                denom / self.variance
            )
            out["l0_loss"] = l0.detach()
            loss = loss + s.l0_coefficient * l0
        out.update(loss=loss, fvu=mse.detach(), fired=on.any(0), l0=on.sum().detach())
        return out

    def _topk(self, x: torch.Tensor, dead: torch.Tensor, denom: float) -> dict[str, torch.Tensor]:
        """TopK on its k latents alone, forward and backward: the encoder's gradient through
        :func:`~.selected.selected_pre_acts`, the decoder as a weighted sum of k decoder rows (an embedding
        bag), not a dense ``[rows, d_sae] @ [d_sae, d_in]`` product that is almost all zeros."""
        sae = self.sae
        # A trained SAE's pre-activations are (x - b_dec) @ W_enc + b_enc: the form selected_pre_acts needs.
        centre = sae.b_dec if sae.cfg.apply_b_dec_to_input else None
        with torch.no_grad():
            pre = sae.pre_acts(x)  # [rows, d_sae]
            chosen = top_k(pre, sae.cfg.k, rectify=sae.rectify).indices  # [rows, k]

        def values_of(latents: torch.Tensor) -> torch.Tensor:  # [rows, m] -> their pre-activations [rows, m]
            w = sae.W_enc.T[None]  # [1, d_sae, d_in]
            return selected_pre_acts(pre[:, None], latents[:, None], x[:, None], w, sae.b_enc[None], centre)[
                :, 0
            ]

        values = values_of(chosen)
        active = Active(values.relu() if sae.rectify else values, chosen)
        recons = active.decode(sae.W_dec) + sae.b_dec  # [rows, d_in]
        on = active.values > 0
        fired = torch.zeros(sae.d_sae, dtype=torch.bool, device=pre.device).index_fill_(0, chosen[on], True)
        return self._finish({}, pre, recons - x, dead, denom, fired, on.sum(), values_of)

    def _finish(
        self,
        out: dict[str, torch.Tensor],
        pre: torch.Tensor,
        error: torch.Tensor,
        dead: torch.Tensor,
        denom: float,
        fired: torch.Tensor,
        l0: torch.Tensor,
        values_of: Callable[[torch.Tensor], torch.Tensor],
    ) -> dict[str, torch.Tensor]:
        """The TopK-family losses: reconstruction plus the AuxK loss for dead latents (``values_of(latents)``:
        the pre-activations of ``latents [rows, m]``, with their gradient)."""
        mse = error.pow(2).sum() / denom
        aux = aux_k(pre, dead, values_of, self.sae.W_dec, error, max(1, self.sae.d_in // 2)) / denom
        out.update(
            aux=aux.detach(),
            loss=mse + self.s.aux_coefficient * aux,
            fvu=mse.detach(),
            fired=fired,
            l0=l0.detach(),
        )
        return out

    @torch.no_grad()
    def project_decoder_gradient(self) -> None:
        """Remove the part of ``W_dec``'s gradient that would change the rows' norms."""
        w, g = self.sae.W_dec, self.sae.W_dec.grad
        if g is not None:
            g -= (g * w).sum(-1, keepdim=True) * w

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Decoder rows back to unit norm."""
        w = self.sae.W_dec
        w /= w.norm(dim=-1, keepdim=True).clamp(min=torch.finfo(w.dtype).eps)
