"""The norm of split inputs computed once per position: the same values, and each head's own gradient."""

import pytest
import torch

from interp import TransformerConfig
from interp.model.head_norm import norm_heads
from interp.model.norm import Norm


def _norm(kind: str) -> Norm:
    cfg = TransformerConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=10, n_ctx=8, norm=kind)
    norm = Norm(cfg)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        norm.w.copy_(1 + 0.3 * torch.randn(16, generator=g))
        if norm.b is not None:
            norm.b.copy_(torch.randn(16, generator=g))
    return norm


def _per_head(norm: Norm, stream: torch.Tensor, grad: torch.Tensor, heads: int):
    """Values and input gradient of the norm run on every head's copy (the definition)."""
    x = stream.detach().expand(-1, -1, heads, -1).contiguous().requires_grad_(True)
    y = norm(x)
    return y, torch.autograd.grad(y, x, grad)[0]


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_shared_norm_gives_each_head_its_own_gradient(kind):
    norm = _norm(kind).requires_grad_(False)
    g = torch.Generator().manual_seed(1)
    stream = 2 * torch.randn(3, 5, 1, 16, generator=g) + 0.5  # [batch, pos, 1, d_model]
    grad = torch.randn(3, 5, 4, 16, generator=g)  # a different gradient for each of 4 heads
    leaf = stream.clone().requires_grad_(True)
    heads = leaf.expand(-1, -1, 4, -1)  # one stream broadcast over the heads, as split inputs make it
    got = norm_heads(norm, heads)
    got_grad = torch.autograd.grad(got, heads, grad)[0]
    want, want_grad = _per_head(norm, stream, grad, 4)
    assert type(got.grad_fn).__name__ == "_SharedRowBackward"  # the shortcut was taken
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    torch.testing.assert_close(got_grad, want_grad, atol=1e-6, rtol=1e-5)
    assert (want_grad[:, :, 0] - want_grad[:, :, 1]).abs().max() > 0.1  # the heads' gradients differ


def test_the_norm_runs_per_head_when_its_weights_need_gradients_or_the_heads_differ():
    norm = _norm("rmsnorm")  # weights require gradients
    stream = torch.randn(2, 3, 1, 16).requires_grad_(True)
    y = norm_heads(norm, stream.expand(-1, -1, 3, -1))
    assert type(y.grad_fn).__name__ != "_SharedRowBackward"
    y.sum().backward()
    assert norm.w.grad is not None and norm.w.grad.abs().sum() > 0
    edited = torch.randn(2, 3, 3, 16)  # heads that differ: nothing to share
    torch.testing.assert_close(norm_heads(norm.requires_grad_(False), edited), norm(edited), atol=0, rtol=0)
