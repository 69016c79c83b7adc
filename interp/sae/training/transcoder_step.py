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
from torch import nn

from interp import distributed
from interp.sae.activation import top_k
from interp.sae.latents import Active
from interp.sae.training.selected import selected_pre_acts
from interp.sae.training.step import _JumpReLU, _Step, aux_k, batch_top_k
from interp.sae.transcoder import CrossLayerTranscoder, Transcoder


class _Shifted(torch.autograd.Function):
    """A CLT's outputs ``[rows, n, d]`` from its biases ``[n, d]`` and the writes of each source layer ``src``
    ``[rows, (n - src) * d]`` into layers ``src..n-1``; the gradient of a write is a view of the outputs'
    gradient (adding into slices of one tensor under autograd would copy the whole gradient once a source)."""

    @staticmethod
    def forward(ctx: Any, bias: torch.Tensor, *writes: torch.Tensor) -> torch.Tensor:  # noqa: ANN205
        n, d = bias.shape
        out = bias.expand(writes[0].shape[0], n, d).clone()
        for src, write in enumerate(writes):
            out[:, src:] += write.view(-1, n - src, d)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):  # noqa: ANN205
        rows, n, d = grad.shape
        return grad.sum(0), *(grad[:, src:].reshape(rows, (n - src) * d) for src in range(n))


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
        per_row = global_rows / distributed.world_size()
        variance = torch.tensor(self.variance, dtype=batch.dtype)
        if s.architecture == "topk":
            return self._topk(x, y, dead.reshape(n, f), per_row, variance)
        pre = torch.einsum("rnd,nfd->rnf", x, tc.W_enc) + tc.b_enc  # [rows, n, f]
        acts = self._activate(pre, global_rows)
        recons = self._decode(acts, x)  # [rows, n, d]
        error = recons - y
        mse = error.pow(2).sum((0, 2)) / (per_row * variance)  # [n]
        loss = mse.sum()
        out: dict[str, torch.Tensor] = {}
        arch = s.architecture
        if arch == "batchtopk":
            aux = self._aux(
                pre, error, dead.reshape(n, f), per_row, variance, lambda i, c: pre[:, i].gather(-1, c)
            )
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

    def _topk(self, x, y, dead, per_row: float, variance: torch.Tensor) -> dict[str, torch.Tensor]:
        """TopK's step on the k chosen features of each row and layer alone, forward and backward: the encoder
        through :func:`~.selected.selected_pre_acts`, the decoder as embedding bags of k rows."""
        tc = self.tc
        n, f = len(tc.layers), tc.d_transcoder
        with torch.no_grad():  # [n, rows, f], the bias added in the product; the top-k on it as it lies
            by_layer = torch.baddbmm(tc.b_enc[:, None], x.transpose(0, 1), tc.W_enc.transpose(1, 2))
            chosen = top_k(by_layer, self.s.k, rectify=tc.rectify).indices.transpose(0, 1)  # [rows, n, k]
            pre = by_layer.transpose(0, 1)  # [rows, n, f]
        values = selected_pre_acts(pre, chosen, x, tc.W_enc, tc.b_enc)  # [rows, n, k], unrectified
        recons = self._decode_chosen(values, chosen, x)  # [rows, n, d]
        error = recons - y
        mse = error.pow(2).sum((0, 2)) / (per_row * variance)  # [n]

        def dead_values(i: int, dead_chosen: torch.Tensor) -> torch.Tensor:
            layer = slice(i, i + 1)
            return selected_pre_acts(
                pre[:, layer], dead_chosen[:, None], x[:, layer], tc.W_enc[layer], tc.b_enc[layer]
            )[:, 0]

        aux = self._aux(pre, error, dead, per_row, variance, dead_values)
        on = values.detach() != 0
        latent = chosen + torch.arange(n, device=chosen.device)[:, None] * f  # [rows, n, k] among n * f
        fired = torch.zeros(n * f, dtype=torch.bool, device=chosen.device).index_fill_(0, latent[on], True)
        return dict(
            loss=mse.sum() + self.s.aux_coefficient * aux,
            aux=aux.detach(),
            fvu=mse.mean().detach(),
            fired=fired,
            l0=on.sum() / n,
        )

    def _decode_chosen(self, values: torch.Tensor, chosen: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``[rows, n, d]``: the chosen features' decoder rows weighted by their values, plus biases and skip."""
        tc = self.tc
        rows, n, k = chosen.shape
        d, f = tc.d_model, tc.d_transcoder
        if not self.clt:
            # [rows, n, k]: each chosen feature's row in the stacked decoders [n * f, d]
            latent = chosen + torch.arange(n, device=chosen.device)[:, None] * f
            flat = Active(values.reshape(rows * n, k), latent.reshape(rows * n, k))
            recons = flat.decode(tc.W_dec.reshape(n * f, d)).view(rows, n, d) + tc.b_dec
        else:
            # [rows, (n - src) * d] each: a row of W_dec[src] holds a feature's writes into every later layer
            writes = [
                Active(values[:, src], chosen[:, src]).decode(tc.W_dec[src].reshape(f, -1))
                for src in range(n)
            ]
            recons = _Shifted.apply(tc.b_dec, *writes)  # [rows, n, d]
        if tc.W_skip is not None:
            recons = recons + torch.einsum("rni,noi->rno", x, tc.W_skip)  # x @ W_skip.T per layer
        return recons

    def _activate(self, pre: torch.Tensor, global_rows: int) -> torch.Tensor:
        s = self.s
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

    def _aux(self, pre, error, dead, per_row: float, variance: torch.Tensor, values_of) -> torch.Tensor:
        """The AuxK loss of every layer, each predicting its own residual; ``values_of(layer, latents)`` gives
        the pre-activations of ``latents [rows, m]`` of that layer, with their gradient."""
        total = pre.new_zeros(())
        k_aux = max(1, self.tc.d_model // 2)
        for i in range(pre.shape[1]):
            loss = aux_k(
                pre[:, i], dead[i], lambda c, i=i: values_of(i, c), self._own_decoder(i), error[:, i], k_aux
            )
            total = total + loss / (per_row * variance[i])
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
