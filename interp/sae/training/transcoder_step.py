"""One training step of a transcoder set or a cross-layer transcoder, as a module DDP can wrap.

A batch row holds every layer's input and then every layer's output (``[2 * n_layers * d_model]``, scaled).
The loss is the sum over output layers of the squared error of each output against the sum of the decoders
writing to it (and the skip term), each divided by that layer's variance, so it reads as a sum of fractions of
variance unexplained; it splits across ranks as the SAE step's does (:mod:`.step`). The sparsity of the
activation family follows the SAE recipe, layer by layer: AuxK on the dead features of TopK and BatchTopK
(predicting the residual of the features' own layer), L1 for ReLU, the straight-through L0 for JumpReLU.
Each feature's decoder (for a CLT, its rows into every layer it writes, together) is kept at unit norm.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from interp import distributed
from interp.sae.activation import top_k
from interp.sae.training.step import _JumpReLU, _Step, batch_top_k
from interp.sae.transcoder import CrossLayerTranscoder, Transcoder


class TranscoderStep(nn.Module):
    """The transcoder being trained plus what only training needs (JumpReLU's log-thresholds)."""

    def __init__(self, tc: Transcoder, settings: Any, variance: list[float]) -> None:
        super().__init__()
        self.tc, self.s, self.variance = tc, settings, variance
        self.clt = isinstance(tc, CrossLayerTranscoder)
        n = len(tc.layers)
        if settings.architecture == "jumprelu":
            init = torch.full((n, tc.d_transcoder), math.log(settings.jumprelu_init_threshold))
            self.log_threshold = nn.Parameter(init)

    def decoders(self) -> list[nn.Parameter]:
        """One decoder parameter per source layer (a set's stacked one counts once)."""
        return list(self.tc.W_dec) if self.clt else [self.tc.W_dec]

    def trained_parameters(self) -> list[nn.Parameter]:
        tc = self.tc
        params = [tc.W_enc, tc.b_enc, tc.b_dec, *self.decoders()]
        if tc.W_skip is not None:
            params.append(tc.W_skip)
        return params + ([self.log_threshold] if hasattr(self, "log_threshold") else [])

    def forward(self, batch: torch.Tensor, dead: torch.Tensor, global_rows: int) -> dict[str, torch.Tensor]:
        tc, s = self.tc, self.s
        n, d, f = len(tc.layers), tc.d_model, tc.d_transcoder
        rows = batch.shape[0]
        x = batch[:, : n * d].reshape(rows, n, d)
        y = batch[:, n * d :].reshape(rows, n, d)
        pre = torch.einsum("rnd,nfd->rnf", x, tc.W_enc) + tc.b_enc  # [rows, n, f]
        acts = self._activate(pre, global_rows)
        recons = self._decode(acts, x)  # [rows, n, d]
        error = recons - y
        per_row = global_rows / distributed.world_size()
        variance = torch.tensor(self.variance, dtype=error.dtype)
        mse = error.pow(2).sum((0, 2)) / (per_row * variance)  # [n]
        loss = mse.sum()
        out: dict[str, torch.Tensor] = {}
        arch = s.architecture
        if arch in ("topk", "batchtopk"):
            aux = self._aux(pre, error, dead.reshape(n, f), per_row, variance)
            out["aux"] = aux.detach()
            loss = loss + s.aux_coefficient * aux
        elif arch == "standard":
            l1 = (acts * self._decoder_norms()).sum() / per_row
            out["l1"] = l1.detach()
            loss = loss + s.l1_coefficient * l1
        else:
            thresholds = self.log_threshold.exp()
            l0 = (
                sum(_Step.apply(pre[:, i], thresholds[i], s.jumprelu_bandwidth).sum() for i in range(n))
                / per_row
            )
            out["l0_loss"] = l0.detach()
            loss = loss + s.l0_coefficient * l0
        on = acts != 0
        out.update(loss=loss, fvu=mse.mean().detach(), fired=on.any(0).reshape(-1), l0=on.sum().detach() / n)
        return out

    def _activate(self, pre: torch.Tensor, global_rows: int) -> torch.Tensor:
        s = self.s
        if s.architecture == "topk":
            return top_k(pre, s.k, rectify=self.tc.rectify).to_dense(pre.shape[-1])  # [rows, n, f]
        if s.architecture == "batchtopk":
            relu = pre.relu()
            return torch.stack([batch_top_k(relu[:, i], s.k, global_rows)[0] for i in range(pre.shape[1])], 1)
        if s.architecture == "jumprelu":
            thresholds = self.log_threshold.exp()
            bw = s.jumprelu_bandwidth
            return torch.stack(
                [_JumpReLU.apply(pre[:, i], thresholds[i], bw) for i in range(pre.shape[1])], 1
            )
        return pre.relu()

    def _decode(self, acts: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        tc = self.tc
        if not self.clt:
            recons = torch.einsum("rnf,nfd->rnd", acts, tc.W_dec) + tc.b_dec
        else:
            n = acts.shape[1]
            writes: list[list[torch.Tensor]] = [[] for _ in range(n)]
            for src in range(n):
                w = torch.einsum("rf,fod->rod", acts[:, src], tc.W_dec[src])  # [rows, n - src, d]
                for j in range(n - src):
                    writes[src + j].append(w[:, j])
            recons = torch.stack([tc.b_dec[out] + sum(writes[out]) for out in range(n)], dim=1)
        if tc.W_skip is not None:
            recons = recons + torch.einsum("rni,noi->rno", x, tc.W_skip)  # x @ W_skip.T per layer
        return recons

    def _decoder_norms(self) -> torch.Tensor:
        """``[n, f]``: each feature's decoder norm (a CLT's over every layer it writes)."""
        if not self.clt:
            return self.tc.W_dec.norm(dim=-1)
        return torch.stack([w.flatten(1).norm(dim=-1) for w in self.tc.W_dec])

    def _own_decoder(self, layer: int) -> torch.Tensor:
        """``[f, d]``: the rows features of ``layer`` write into that same layer."""
        return self.tc.W_dec[layer][:, 0] if self.clt else self.tc.W_dec[layer]

    def _aux(self, pre, error, dead, per_row: float, variance: torch.Tensor) -> torch.Tensor:
        total = pre.new_zeros(())
        k_aux = max(1, self.tc.d_model // 2)
        for i in range(pre.shape[1]):
            n_dead = int(dead[i].sum())
            if n_dead == 0:
                continue
            masked = torch.where(dead[i][None], pre[:, i], torch.full_like(pre[:, i], -math.inf))
            values, indices = masked.topk(min(k_aux, n_dead), dim=-1, sorted=False)
            # [rows, d]: the dead features' guess at their layer's residual, a weighted sum of decoder rows
            guess = F.embedding_bag(
                indices, self._own_decoder(i), per_sample_weights=values.relu(), mode="sum"
            )
            scale = min(n_dead / k_aux, 1.0)
            total = total + scale * (guess + error[:, i].detach()).pow(2).sum() / (per_row * variance[i])
        return total

    @torch.no_grad()
    def project_decoder_gradient(self) -> None:
        """Remove the part of each decoder's gradient that would change its features' norms."""
        for w in self.decoders():
            if w.grad is None:
                continue
            dims = tuple(range(w.ndim - 1 if not self.clt else 1, w.ndim))
            w.grad -= (w.grad * w).sum(dims, keepdim=True) * w

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Each feature's decoder back to unit norm."""
        for w in self.decoders():
            dims = tuple(range(w.ndim - 1 if not self.clt else 1, w.ndim))
            w /= w.pow(2).sum(dims, keepdim=True).sqrt().clamp(min=torch.finfo(w.dtype).eps)
