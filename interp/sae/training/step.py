"""One training step of any dictionary (an SAE, a transcoder set, a cross-layer transcoder), as a module that
DistributedDataParallel can wrap.

The step reads the dictionary through :mod:`.parts`: ``n`` layers, each reading an input and predicting an
output (an SAE: one layer predicting its own input). A batch row holds every layer's input and then every
layer's output (``[2 * n * d]``, scaled); an SAE's row is its input alone. The loss is the sum over output layers
of the squared error of each output against the sum of the decoders writing to it (and the skip term), each
divided by that layer's variance per row (measured once at initialisation) and by the global batch, so it reads
as a sum of fractions of variance unexplained and splits exactly across ranks: each rank returns its rows'
share times the world size, and DDP's gradient average gives the gradient of the whole batch. The sparsity
terms depend on the architecture, layer by layer:

- ``topk`` and ``batchtopk``: the AuxK loss (:func:`~.sparsity.aux_k`): the ``d / 2`` strongest dead features
  predict the residual of their own layer, weight ``aux_coefficient``. BatchTopK keeps the ``k * batch``
  largest activations of the whole batch (across ranks); for an SAE, which runs as a JumpReLU at inference, the
  threshold that cut is recorded;
- ``standard``: L1 of the activations weighted by decoder norms, weight ``l1_coefficient``;
- ``jumprelu``: L0 through a straight-through estimator of the step's derivative, with a learned
  log-threshold, weight ``l0_coefficient``.

Each feature's decoder (for a CLT, its rows into every layer it writes, together) is kept at unit norm. TopK
runs on the chosen features alone, forward and backward: the encoder through
:func:`~.selected.selected_pre_acts`, the decoder as embedding bags of k rows.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from interp import distributed
from interp.sae.activation import top_k
from interp.sae.latents import Active
from interp.sae.training.parts import parts
from interp.sae.training.selected import selected_pre_acts
from interp.sae.training.sparsity import JumpReLU, Step, aux_k, batch_top_k


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


class DictionaryStep(nn.Module):
    """The dictionary being trained plus what only training needs (JumpReLU's log-thresholds).

    Args:
        dictionary: an :class:`~interp.sae.SAE`, :class:`~interp.sae.TranscoderSet` or
            :class:`~interp.sae.CrossLayerTranscoder`.
        settings: the run's :class:`~interp.sae.training.TrainSettings`.
        variance: each output layer's variance per row (one number for an SAE).
    """

    def __init__(self, dictionary: nn.Module, settings: Any, variance: float | list[float]) -> None:
        super().__init__()
        self.module, self.parts = dictionary, parts(dictionary)
        self.s, self.variance = settings, variance
        if settings.architecture == "jumprelu":
            n, f = self.parts.n_layers, self.parts.n_features
            init = torch.full((n, f), math.log(settings.jumprelu_init_threshold))
            self.log_threshold = nn.Parameter(init.to(self.parts.b_dec.dtype))

    def trained_parameters(self) -> list[nn.Parameter]:
        """The parameters the optimizer updates, in the order a checkpoint stores them."""
        return self.parts.parameters() + ([self.log_threshold] if hasattr(self, "log_threshold") else [])

    def forward(self, batch: torch.Tensor, dead: torch.Tensor, global_rows: int) -> dict[str, torch.Tensor]:
        p, s = self.parts, self.s
        n, d, f = p.n_layers, p.d_out, p.n_features
        rows = batch.shape[0]
        if p.autoencoder:
            x = y = batch.reshape(rows, 1, -1)
        else:
            x = batch[:, : n * d].reshape(rows, n, d)
            y = batch[:, n * d :].reshape(rows, n, d)
        per_row = global_rows / distributed.world_size()
        variance = torch.tensor(self.variance, dtype=batch.dtype).reshape(-1)
        if s.architecture == "topk":
            return self._topk(x, y, dead.reshape(n, f), per_row, variance)
        centred = x if p.centre is None else x - p.centre
        pre = torch.einsum("rnd,nfd->rnf", centred, p.w_enc) + p.b_enc  # [rows, n, f]
        acts, thresholds = self._activate(pre, global_rows)
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
            if p.records_threshold:
                out["batch_threshold"] = thresholds.detach()
        elif arch == "standard":
            l1 = (acts * self._decoder_norms()).sum() / per_row
            out["l1"] = l1.detach()
            loss = loss + s.l1_coefficient * l1
        else:
            thresholds = self.log_threshold.exp()
            l0 = (
                sum(Step.apply(pre[:, i], thresholds[i], s.jumprelu_bandwidth).sum() for i in range(n))
                / per_row
            )
            out["l0_loss"] = l0.detach()
            loss = loss + s.l0_coefficient * l0
        on = acts != 0  # active: the feature writes (see interp.sae.evaluate)
        out.update(loss=loss, fvu=mse.mean().detach(), fired=on.any(0).reshape(-1), l0=on.sum().detach() / n)
        return out

    def _topk(self, x, y, dead, per_row: float, variance: torch.Tensor) -> dict[str, torch.Tensor]:
        """TopK's step on the k chosen features of each row and layer alone, forward and backward: the encoder
        through :func:`~.selected.selected_pre_acts`, the decoder as embedding bags of k rows."""
        p = self.parts
        n, f = p.n_layers, p.n_features
        centre = p.centre
        with torch.no_grad():  # [n, rows, f], the bias added in the product; the top-k on it as it lies
            centred = x if centre is None else x - centre
            by_layer = torch.baddbmm(p.b_enc[:, None], centred.transpose(0, 1), p.w_enc.transpose(1, 2))
            chosen = top_k(by_layer, self.s.k, rectify=p.rectify).indices.transpose(0, 1)  # [rows, n, k]
            pre = by_layer.transpose(0, 1)  # [rows, n, f]
        w_enc, b_enc = p.w_enc, p.b_enc
        values = selected_pre_acts(pre, chosen, x, w_enc, b_enc, centre)  # [rows, n, k], unrectified
        kept = values.relu() if p.rectify else values
        recons = self._decode_chosen(kept, chosen, x)  # [rows, n, d]
        error = recons - y
        mse = error.pow(2).sum((0, 2)) / (per_row * variance)  # [n]

        def dead_values(i: int, dead_chosen: torch.Tensor) -> torch.Tensor:
            layer = slice(i, i + 1)
            return selected_pre_acts(
                pre[:, layer], dead_chosen[:, None], x[:, layer], w_enc[layer], b_enc[layer], centre
            )[:, 0]

        aux = self._aux(pre, error, dead, per_row, variance, dead_values)
        on = kept.detach() != 0
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
        p = self.parts
        rows, n, k = chosen.shape
        d, f = p.d_out, p.n_features
        if not p.clt:
            # [rows, n, k]: each chosen feature's row in the stacked decoders [n * f, d]
            latent = chosen + torch.arange(n, device=chosen.device)[:, None] * f
            flat = Active(values.reshape(rows * n, k), latent.reshape(rows * n, k))
            recons = flat.decode(p.w_dec.reshape(n * f, d)).view(rows, n, d) + p.b_dec
        else:
            # [rows, (n - src) * d] each: a row of W_dec[src] holds a feature's writes into every later layer
            writes = [
                Active(values[:, src], chosen[:, src]).decode(p.w_dec[src].reshape(f, -1)) for src in range(n)
            ]
            recons = _Shifted.apply(p.b_dec, *writes)  # [rows, n, d]
        if p.w_skip is not None:
            recons = recons + torch.einsum("rni,noi->rno", x, p.w_skip)  # x @ W_skip.T per layer
        return recons

    def _activate(self, pre: torch.Tensor, global_rows: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The activations ``[rows, n, f]`` and, for BatchTopK, each layer's threshold ``[n]``."""
        s = self.s
        if s.architecture == "batchtopk":
            relu = pre.relu()
            cuts = [batch_top_k(relu[:, i], s.k, global_rows) for i in range(pre.shape[1])]
            return torch.stack([acts for acts, _ in cuts], 1), torch.stack([cut for _, cut in cuts])
        if s.architecture == "jumprelu":
            thresholds = self.log_threshold.exp()
            bw = s.jumprelu_bandwidth
            acts = [JumpReLU.apply(pre[:, i], thresholds[i], bw) for i in range(pre.shape[1])]
            return torch.stack(acts, 1), None
        return pre.relu(), None

    def _decode(self, acts: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        p = self.parts
        if not p.clt:
            recons = torch.einsum("rnf,nfd->rnd", acts, p.w_dec) + p.b_dec
        else:
            n = acts.shape[1]
            writes: list[list[torch.Tensor]] = [[] for _ in range(n)]
            for src in range(n):
                w = torch.einsum("rf,fod->rod", acts[:, src], p.w_dec[src])  # [rows, n - src, d]
                for j in range(n - src):
                    writes[src + j].append(w[:, j])
            recons = torch.stack([p.b_dec[out] + sum(writes[out]) for out in range(n)], dim=1)
        if p.w_skip is not None:
            recons = recons + torch.einsum("rni,noi->rno", x, p.w_skip)  # x @ W_skip.T per layer
        return recons

    def _decoder_norms(self) -> torch.Tensor:
        """``[n, f]``: each feature's decoder norm (a CLT's over every layer it writes)."""
        p = self.parts
        if not p.clt:
            return p.w_dec.norm(dim=-1)
        return torch.stack([w.flatten(1).norm(dim=-1) for w in p.w_dec])

    def _own_decoder(self, layer: int) -> torch.Tensor:
        """``[f, d]``: the rows features of ``layer`` write into that same layer."""
        return self.parts.w_dec[layer][:, 0] if self.parts.clt else self.parts.w_dec[layer]

    def _aux(self, pre, error, dead, per_row: float, variance: torch.Tensor, values_of) -> torch.Tensor:
        """The AuxK loss of every layer, each predicting its own residual; ``values_of(layer, latents)`` gives
        the pre-activations of ``latents [rows, m]`` of that layer, with their gradient."""
        total = pre.new_zeros(())
        k_aux = max(1, self.parts.d_out // 2)
        for i in range(pre.shape[1]):
            loss = aux_k(
                pre[:, i], dead[i], lambda c, i=i: values_of(i, c), self._own_decoder(i), error[:, i], k_aux
            )
            total = total + loss / (per_row * variance[i])
        return total

    def _feature_dims(self, w: torch.Tensor) -> tuple[int, ...]:
        """The dimensions of a decoder parameter that hold one feature's writes (a CLT's: every layer's)."""
        return tuple(range(w.ndim - 1 if not self.parts.clt else 1, w.ndim))

    @torch.no_grad()
    def project_decoder_gradient(self) -> None:
        """Remove the part of each decoder's gradient that would change its features' norms."""
        for w in self.parts.decoders():
            if w.grad is not None:
                w.grad -= (w.grad * w).sum(self._feature_dims(w), keepdim=True) * w

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Each feature's decoder back to unit norm."""
        for w in self.parts.decoders():
            norm = w.pow(2).sum(self._feature_dims(w), keepdim=True).sqrt()
            w /= norm.clamp(min=torch.finfo(w.dtype).eps)
