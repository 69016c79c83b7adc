"""TopK training through the chosen latents alone gives the dense computation's loss and gradients.

Each step is compared in float64 with the dense computation written out here (pre-activations with a graph,
the dense TopK code, decoders as matrix products, AuxK on dead latents), so any difference is rounding of
float64 (the same terms summed in another order): a relative 1e-10 is a million times that and a thousandth of
the smallest gradient a wrong term would leave.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from interp.sae import CrossLayerTranscoder, TranscoderSet
from interp.sae.config import SAEConfig
from interp.sae.module import SAE
from interp.sae.training import TrainSettings
from interp.sae.training.selected import selected_pre_acts
from interp.sae.training.step import DictionaryStep
from tests.tolerance import float32_rounding

ROWS, D, F, K = 40, 6, 24, 3


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10 * float(want.abs().max()))


def test_the_chosen_entries_have_the_dense_gradient_and_no_other():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, 2, D, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, F, D, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, F, generator=g, dtype=torch.float64, requires_grad=True)
    c = torch.randn(D, generator=g, dtype=torch.float64, requires_grad=True)
    dense = torch.einsum("rnd,nfd->rnf", x - c, w) + b  # [rows, n, f]
    chosen = dense.detach().topk(K, dim=-1).indices
    weights = torch.randn(ROWS, 2, K, generator=g, dtype=torch.float64)
    (dense.gather(-1, chosen) * weights).sum().backward()
    want = [t.grad.clone() for t in (x, w, b, c)]
    for t in (x, w, b, c):
        t.grad = None
    got = selected_pre_acts(dense.detach(), chosen, x, w, b, c)
    assert torch.equal(got, dense.detach().gather(-1, chosen))  # the forward values, bit for bit
    (got * weights).sum().backward()
    for t, ref in zip((x, w, b, c), want, strict=True):
        _close(t.grad, ref)


def _rows(n: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(ROWS, 2 * n * D, generator=g, dtype=torch.float64)


def _dead(n_features: int) -> torch.Tensor:
    dead = torch.zeros(n_features, dtype=torch.bool)
    dead[::3] = True  # a third of the features: AuxK runs with fewer dead than d / 2 in no layer
    return dead


def _dense_transcoder_loss(tc, x, y, dead, variance, settings) -> torch.Tensor:
    n, f = len(tc.layers), tc.d_transcoder
    pre = torch.einsum("rnd,nfd->rnf", x, tc.W_enc) + tc.b_enc
    values, indices = pre.topk(settings.k, dim=-1)
    acts = torch.zeros_like(pre).scatter(-1, indices, values)  # unrectified, as transcoders keep them
    if isinstance(tc, CrossLayerTranscoder):
        recons = torch.stack(
            [
                tc.b_dec[out] + sum(acts[:, s] @ tc.W_dec[s][:, out - s] for s in range(out + 1))
                for out in range(n)
            ],
            1,
        )
        own = [tc.W_dec[s][:, 0] for s in range(n)]
    else:
        recons = torch.einsum("rnf,nfd->rnd", acts, tc.W_dec) + tc.b_dec
        own = list(tc.W_dec)
    if tc.W_skip is not None:
        recons = recons + torch.einsum("rni,noi->rno", x, tc.W_skip)
    error = recons - y
    loss = (error.pow(2).sum((0, 2)) / (ROWS * torch.tensor(variance, dtype=x.dtype))).sum()
    dead = dead.reshape(n, f)
    k_aux = D // 2
    for i in range(n):
        n_dead = int(dead[i].sum())
        masked = torch.where(dead[i][None], pre[:, i], torch.full_like(pre[:, i], -math.inf))
        v, idx = masked.topk(min(k_aux, n_dead), dim=-1)
        guess = torch.zeros_like(pre[:, i]).scatter(-1, idx, v.relu()) @ own[i]
        aux = min(n_dead / k_aux, 1.0) * (guess + error[:, i].detach()).pow(2).sum() / (ROWS * variance[i])
        loss = loss + settings.aux_coefficient * aux
    return loss


@pytest.mark.parametrize("kind", ["skip-transcoder", "clt"])
def test_a_transcoder_step_equals_the_dense_computation(kind):
    n = 3
    g = torch.Generator().manual_seed(2)
    common = dict(activation="topk", k=K, W_skip=torch.randn(n, D, D, generator=g) if kind != "clt" else None)
    w_enc, b_enc, b_dec = torch.randn(n, F, D, generator=g), torch.randn(n, F, generator=g), torch.randn(n, D)
    if kind == "clt":
        tc = CrossLayerTranscoder(
            w_enc, [torch.randn(F, n - i, D, generator=g) for i in range(n)], b_enc, b_dec, **common
        )
    else:
        tc = TranscoderSet(w_enc, torch.randn(n, F, D, generator=g), b_enc, b_dec, **common)
    tc = tc.double()
    settings = TrainSettings(d_sae=F, k=K)
    variance = [1.5, 2.0, 0.5]
    step = DictionaryStep(tc, settings, variance)
    batch, dead = _rows(n), _dead(n * F)
    got = step(batch, dead, ROWS)
    assert float(got["aux"]) > 0
    got["loss"].backward()
    grads = {name: p.grad.clone() for name, p in tc.named_parameters() if p.grad is not None}
    tc.zero_grad(set_to_none=True)
    x, y = batch[:, : n * D].reshape(ROWS, n, D), batch[:, n * D :].reshape(ROWS, n, D)
    want = _dense_transcoder_loss(tc, x, y, dead, variance, settings)
    _close(got["loss"].detach(), want.detach())
    want.backward()
    assert sorted(grads) == sorted(name for name, p in tc.named_parameters() if p.requires_grad)
    for name, p in tc.named_parameters():
        _close(grads[name], p.grad)


def test_an_sae_step_equals_the_dense_computation():
    g = torch.Generator().manual_seed(3)
    sae = SAE(SAEConfig(d_in=D, d_sae=F, architecture="topk", k=K)).double()
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    step = DictionaryStep(sae, TrainSettings(d_sae=F, k=K), 1.7)
    x, dead = _rows(1)[:, :D], _dead(F)
    got = step(x, dead, ROWS)
    assert float(got["aux"]) > 0
    got["loss"].backward()
    grads = {name: p.grad.clone() for name, p in sae.named_parameters()}
    sae.zero_grad(set_to_none=True)
    pre = (x - sae.b_dec) @ sae.W_enc + sae.b_enc
    values, indices = pre.topk(K, dim=-1)
    error = torch.zeros_like(pre).scatter(-1, indices, values.relu()) @ sae.W_dec + sae.b_dec - x
    masked = torch.where(dead[None], pre, torch.full_like(pre, -math.inf))
    v, idx = masked.topk(D // 2, dim=-1)
    guess = torch.zeros_like(pre).scatter(-1, idx, v.relu()) @ sae.W_dec
    denom = ROWS * 1.7
    aux = (int(dead.sum()) / (D // 2) if int(dead.sum()) < D // 2 else 1.0) * (
        (guess + error.detach()).pow(2).sum() / denom
    )
    want = error.pow(2).sum() / denom + step.s.aux_coefficient * aux
    _close(got["loss"].detach(), want.detach())
    want.backward()
    for name, p in sae.named_parameters():
        _close(grads[name], p.grad)


@pytest.mark.parametrize("kind", ["skip-transcoder", "clt"])
def test_in_float32_the_selected_gradients_are_as_near_the_float64_ones_as_the_dense_gradients(kind):
    """The speed change moves gradients by float32 rounding only: against the float64 computation, the
    selected path's float32 gradients stay within twice the error of the dense path's float32 gradients."""
    n = 3
    g = torch.Generator().manual_seed(5)
    skip = torch.randn(n, D, D, generator=g) if kind != "clt" else None
    w_enc, b_enc, b_dec = torch.randn(n, F, D, generator=g), torch.randn(n, F, generator=g), torch.randn(n, D)
    if kind == "clt":
        decoders = [torch.randn(F, n - i, D, generator=g) for i in range(n)]
        tc = CrossLayerTranscoder(w_enc, decoders, b_enc, b_dec, activation="topk", k=K)
    else:
        tc = TranscoderSet(
            w_enc, torch.randn(n, F, D, generator=g), b_enc, b_dec, activation="topk", k=K, W_skip=skip
        )
    settings, variance = TrainSettings(d_sae=F, k=K), [1.5, 2.0, 0.5]
    batch, dead = _rows(n).float(), _dead(n * F)

    def grads(model, selected: bool) -> dict[str, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        rows = batch.to(next(model.parameters()).dtype)
        if selected:
            loss = DictionaryStep(model, settings, variance)(rows, dead, ROWS)["loss"]
        else:
            x, y = rows[:, : n * D].reshape(ROWS, n, D), rows[:, n * D :].reshape(ROWS, n, D)
            loss = _dense_transcoder_loss(model, x, y, dead, variance, settings)
        loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    exact = grads(copy.deepcopy(tc).double(), selected=False)
    dense, chosen = grads(tc, selected=False), grads(tc, selected=True)
    for name, ref in exact.items():
        bound = 2 * float32_rounding(dense[name], ref)
        error = float((chosen[name].double() - ref).abs().max())
        assert error <= bound, (
            f"{name}: the selected path errs by {error:.3e}, twice the dense path's {bound:.3e}"
        )
