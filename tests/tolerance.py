"""Tolerances that follow from the computation, so that they hold on any CPU's kernels (docs/development.md).

Float32 rounds each result to 24 bits: one rounding errs by at most ``eps / 2`` of the value rounded
(``eps = 2**-23``). A sum rounds at every addition, and which partial sums arise depends on the kernel (MKL
picks its blocking by CPU, torch its vector width), so two evaluations of the same sum differ by up to about
``eps * sum(|terms|)`` however small the result: the rounding scales with the terms, not with their sum. A
computation that chains sums (a norm, a matrix product, a softmax, the next layer's products...) passes each
one's error on, so a transformer's output carries up to one such error per stage from the input:
:func:`stages` counts them.

Two ways to bound a comparison of two float32 computations of the same quantity, both used in the tests:

- terms: ``stages * eps * sum(|terms|)``, where the terms are those of the last sum (the unembedding's
  ``|x_i| * |W_U[i, v]|`` for logits, the target's read ``|w_i| * |x_i|`` for a read of the stream);
- a float64 reference: the same computation in float64 is exact to float32's eyes, and the float32 rounding
  of the plain path, ``max |plain32 - ref64|``, measures what float32 does to this computation on this machine;
  another float32 path must stay within twice that of the reference.

Bit-exact assertions (``torch.equal``) stay where the very same operations run in the same order on the same
values: a copy, a file read back, an index, the same function called twice.
"""

from __future__ import annotations

import torch

EPS32 = torch.finfo(torch.float32).eps


def stages(n_layers: int) -> int:
    """Sequential rounding stages from the input to the logits of a transformer of ``n_layers`` blocks: per
    block the two norms (mean and variance: 2 each), the q/k/v products, the scores, the softmax's sum, the
    mixture of values, the output product and the MLP's two products (11); then the final norm (2) and the
    unembedding (1)."""
    return 11 * n_layers + 3


def logit_bound(model, unembed_in: torch.Tensor) -> torch.Tensor:
    """``[..., d_vocab]``: the float32 rounding bound of logits read from ``unembed_in [..., d_model]``:
    ``stages * eps * sum_i |x_i| |W_U[i, v]|`` (the unembedding's terms)."""
    w_u = model.unembed.weight.detach().float()  # [d_model, d_vocab]
    terms = unembed_in.detach().float().abs() @ w_u.abs()
    bias = getattr(model.unembed, "bias", None)
    if bias is not None:
        terms = terms + bias.detach().float().abs()
    return stages(model.cfg.n_layers) * EPS32 * terms


def float32_rounding(plain32: torch.Tensor, reference64: torch.Tensor) -> float:
    """How far float32 takes this computation from its float64 reference on this machine (at least one
    rounding of the largest value, so that an exact plain path still leaves room for another order)."""
    measured = float((plain32.double() - reference64.double()).abs().max())
    return max(measured, EPS32 * float(reference64.abs().max()))


def assert_within(
    actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor | float, what: str = ""
) -> None:
    """``|actual - expected| <= bound`` elementwise, or an error naming the worst element and its ratio."""
    diff = (actual.detach().double() - expected.detach().double()).abs()
    bound = torch.as_tensor(bound, dtype=torch.float64).expand_as(diff)
    ratio = diff / bound.clamp_min(torch.finfo(torch.float64).tiny)
    worst = int(ratio.flatten().argmax()) if ratio.numel() else 0
    if ratio.numel() and float(ratio.flatten()[worst]) > 1:
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), diff.shape))
        raise AssertionError(
            f"{what}: |difference| {float(diff.flatten()[worst]):.3e} at {index} exceeds the rounding bound "
            f"{float(bound.flatten()[worst]):.3e} ({float(ratio.flatten()[worst]):.1f} times)"
        )
