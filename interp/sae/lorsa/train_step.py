"""One training step of a Lorsa layer, as a module the trainer's loop (and DistributedDataParallel) runs.

A batch holds whole sequences (:mod:`.sequences`): each head's value mixture is computed over the sequence with
the fused attention kernel, gradients flowing through the pattern into ``W_Q`` and ``W_K`` as into ``W_V``; the
heads are chosen per token (TopK of the heads' ``z``, passed through a ReLU, as llamascopium chooses them); the
output is decoded and compared with the attention output at every position from ``min_position`` on. The loss
is the trainer's: squared error divided by the output's variance per token and by the global count of tokens in
the loss (a fraction of variance unexplained that splits exactly across ranks), plus the architecture's
sparsity term, with the trainer's forms (:mod:`interp.sae.training.sparsity`): AuxK for TopK and BatchTopK
(dead heads predict the residual), L1 weighted by output norms for ReLU, the straight-through L0 for JumpReLU.
Each head's output direction ``W_O[h]`` is kept at unit norm.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from interp import distributed
from interp.sae.activation import top_k
from interp.sae.lorsa.layer import LorsaLayer
from interp.sae.training.sparsity import JumpReLU, Step, aux_k, batch_top_k


class LorsaStep(nn.Module):
    """A Lorsa layer being trained, and its JumpReLU log-thresholds.

    Args:
        layer: the :class:`LorsaLayer`.
        settings: the run's :class:`~interp.sae.training.TrainSettings`.
        variance: the output's variance per token (scaled), measured once at the start.
        split: ``batch -> (x, y)``, each ``[sequences, context, d_model]``.
    """

    def __init__(self, layer: LorsaLayer, settings: Any, variance: float, split: Any) -> None:
        super().__init__()
        self.module, self.s, self.variance, self.split = layer, settings, variance, split
        if settings.architecture == "jumprelu":
            init = torch.full((layer.cfg.n_heads,), math.log(settings.jumprelu_init_threshold))
            self.log_threshold = nn.Parameter(init)

    def trained_parameters(self) -> list[nn.Parameter]:
        """The parameters the optimizer updates, in the order a checkpoint stores them."""
        layer = self.module
        names = ["W_Q", "W_K", "b_Q", "b_K", "W_V", "b_V", "W_O", "b_O", "q_norm", "k_norm"]
        params = [getattr(layer, n) for n in names if getattr(layer, n) is not None]
        return params + ([self.log_threshold] if hasattr(self, "log_threshold") else [])

    def forward(self, batch: torch.Tensor, dead: torch.Tensor, global_tokens: int) -> dict[str, torch.Tensor]:
        s, layer = self.s, self.module
        x, y = self.split(batch)  # [sequences, context, d_model]
        context, first = x.shape[1], s.min_position
        z = layer.pre_acts(x)  # [sequences, context, head]
        in_loss = global_tokens // context * (context - first) / distributed.world_size()  # this rank's share
        pre = z[:, first:].reshape(-1, z.shape[-1])  # [tokens in the loss, head]
        out: dict[str, torch.Tensor] = {}
        if s.architecture == "topk":  # the k chosen heads' output directions alone, as an embedding bag
            chosen = top_k(z, s.k, rectify=True)
            recons = chosen.decode(layer.W_O) + layer.b_O
            acts = chosen.to_dense(z.shape[-1]).detach()  # what is counted active
        else:
            acts = self._activate(z, global_tokens)
            recons = layer.decode(acts)
        error = (recons - y)[:, first:].reshape(-1, y.shape[-1])  # [tokens in the loss, d_model]
        fvu = error.pow(2).sum() / (in_loss * self.variance)
        loss = fvu
        arch = s.architecture
        if arch in ("topk", "batchtopk"):
            k_aux = max(1, layer.cfg.d_model // 2)
            dense = 4 * min(k_aux, int(dead.sum())) >= layer.cfg.n_heads  # many dead heads: one product
            aux = aux_k(pre, dead, lambda c: pre.gather(-1, c), layer.W_O, error, k_aux, dense=dense)
            aux = aux / (in_loss * self.variance)
            out["aux"] = aux.detach()
            loss = loss + s.aux_coefficient * aux
        elif arch == "standard":
            l1 = (acts[:, first:].reshape(-1, z.shape[-1]) * layer.W_O.norm(dim=-1)).sum() / in_loss
            out["l1"] = l1.detach()
            loss = loss + s.l1_coefficient * l1
        else:
            l0 = Step.apply(pre, self.log_threshold.exp(), s.jumprelu_bandwidth).sum() / in_loss
            out["l0_loss"] = l0.detach()
            loss = loss + s.l0_coefficient * l0
        on = acts != 0  # [sequences, context, head]
        out.update(loss=loss, fvu=fvu.detach(), fired=on.flatten(0, 1).any(0), l0=on.sum().detach())
        return out

    def _activate(self, z: torch.Tensor, global_tokens: int) -> torch.Tensor:
        """The activations ``[sequences, context, head]`` (BatchTopK's cut over every rank's tokens)."""
        s = self.s
        if s.architecture == "batchtopk":
            return batch_top_k(z.relu().flatten(0, 1), s.k, global_tokens)[0].view_as(z)
        if s.architecture == "jumprelu":
            return JumpReLU.apply(z, self.log_threshold.exp(), s.jumprelu_bandwidth)
        return z.relu()

    @torch.no_grad()
    def project_decoder_gradient(self) -> None:
        """Remove the part of each ``W_O[h]``'s gradient that would change its norm."""
        w = self.module.W_O
        if w.grad is not None:
            w.grad -= (w.grad * w).sum(-1, keepdim=True) * w

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Each head's output direction back to unit norm."""
        w = self.module.W_O
        w /= w.norm(dim=-1, keepdim=True).clamp(min=torch.finfo(w.dtype).eps)
