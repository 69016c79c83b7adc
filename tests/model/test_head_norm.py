"""The norm and projection of split inputs computed once per position: the same values, and each head's own
gradient."""

import pytest
import torch

from interp import TransformerConfig
from interp.model.head_norm import project_heads
from interp.model.norm import Norm

HEADS, D_MODEL, D_HEAD = 4, 16, 5


def _norm(kind: str, offset: float = 0.0) -> Norm:
    cfg = TransformerConfig(
        n_layers=1, d_model=D_MODEL, n_heads=2, d_vocab=10, n_ctx=8, norm=kind, norm_offset=offset
    )
    norm = Norm(cfg)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        norm.w.copy_(1 + 0.3 * torch.randn(D_MODEL, generator=g))
        if norm.b is not None:
            norm.b.copy_(torch.randn(D_MODEL, generator=g))
    return norm


def _weights(requires_grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    return (0.3 * torch.randn(HEADS, D_MODEL, D_HEAD, generator=g)).requires_grad_(requires_grad)


def _per_head(norm: Norm, w: torch.Tensor, stream: torch.Tensor, grad: torch.Tensor):
    """Values and input gradient of every head's copy normalised and projected on its own (the definition)."""
    x = stream.detach().expand(-1, -1, HEADS, -1).contiguous().requires_grad_(True)
    y = torch.einsum("bphd,hde->bphe", norm(x), w.detach())
    return y, torch.autograd.grad(y, x, grad)[0]


def _shortcut_taken(y: torch.Tensor) -> bool:
    """Whether ``y`` came out of the shared-stream function (under the view that splits its heads)."""
    fn = y.grad_fn
    return (
        type(fn).__name__ == "ViewBackward0"
        and "SharedNormProjection" in type(fn.next_functions[0][0]).__name__
    )


def _stream(seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return 2 * torch.randn(3, 5, 1, D_MODEL, generator=g) + 0.5  # [batch, pos, 1, d_model]


@pytest.mark.parametrize("kind,offset", [("rmsnorm", 0.0), ("rmsnorm", 1.0), ("layernorm", 0.0)])
def test_shared_streams_give_each_head_its_own_gradient(kind, offset):
    norm, w = _norm(kind, offset).requires_grad_(False), _weights()
    stream = _stream()
    grad = torch.randn(3, 5, HEADS, D_HEAD, generator=torch.Generator().manual_seed(3))
    leaf = stream.clone().requires_grad_(True)
    heads = leaf.expand(-1, -1, HEADS, -1)  # one stream broadcast over the heads, as split inputs make it
    got = project_heads(norm, heads, w)
    got_grad = torch.autograd.grad(got, heads, grad)[0]
    want, want_grad = _per_head(norm, w, stream, grad)
    assert _shortcut_taken(got)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got_grad, want_grad, atol=1e-6, rtol=1e-5)
    assert (want_grad[:, :, 0] - want_grad[:, :, 1]).abs().max() > 0.1  # the heads' gradients differ
    # the stream's own gradient is the heads' sum, as the unsplit model gives it
    torch.testing.assert_close(
        torch.autograd.grad(project_heads(norm, leaf.expand(-1, -1, HEADS, -1), w), leaf, grad)[0],
        want_grad.sum(2, keepdim=True),
        atol=1e-5,
        rtol=1e-5,
    )


def test_without_gradients_the_row_is_projected_once_with_the_same_values():
    norm, w = _norm("layernorm").requires_grad_(False), _weights()
    stream = _stream()
    with torch.no_grad():
        got = project_heads(norm, stream.expand(-1, -1, HEADS, -1), w)
    want, _ = _per_head(norm, w, stream, torch.zeros(3, 5, HEADS, D_HEAD))
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_weights_that_need_gradients_get_them_and_differing_heads_run_per_head():
    norm, w = _norm("rmsnorm"), _weights(requires_grad=True)  # both require gradients
    stream = _stream().requires_grad_(True)
    y = project_heads(norm, stream.expand(-1, -1, HEADS, -1), w)
    assert not _shortcut_taken(y)
    y.square().sum().backward()
    want_w = w.detach().clone().requires_grad_(True)
    want_norm = _norm("rmsnorm")
    want = torch.einsum("bphd,hde->bphe", want_norm(stream.detach().expand(-1, -1, HEADS, -1)), want_w)
    want.square().sum().backward()
    torch.testing.assert_close(w.grad, want_w.grad)
    torch.testing.assert_close(norm.w.grad, want_norm.w.grad)
    # a stream that does not need its gradient: one row projected, the weights' gradients still right
    w.grad = None
    project_heads(norm, stream.detach().expand(-1, -1, HEADS, -1), w).square().sum().backward()
    torch.testing.assert_close(w.grad, want_w.grad)
    edited = torch.randn(2, 3, HEADS, D_MODEL)  # heads that differ: nothing to share
    norm.requires_grad_(False)
    with torch.no_grad():
        got = project_heads(norm, edited, w)
        torch.testing.assert_close(got, torch.einsum("bphd,hde->bphe", norm(edited), w), atol=0, rtol=0)


def test_a_hooked_norm_runs_per_head():
    norm, w = _norm("rmsnorm").requires_grad_(False), _weights()
    seen = []
    norm.hook_normalized.add_hook(lambda x, hook: seen.append(x.shape))
    project_heads(norm, _stream().expand(-1, -1, HEADS, -1), w)
    assert seen == [torch.Size([3, 5, HEADS, D_MODEL])]  # every head's copy passed the hook


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_a_projection_edited_in_place_still_gets_each_heads_gradient(kind):
    """A hook on q, k or v may edit the projection in place: the backward then reads no stale values."""
    norm, w = _norm(kind).requires_grad_(False), _weights()
    stream = _stream()
    grad = torch.randn(3, 5, HEADS, D_HEAD, generator=torch.Generator().manual_seed(4))
    heads = stream.clone().requires_grad_(True).expand(-1, -1, HEADS, -1)
    got = project_heads(norm, heads, w)
    got[:, :, 1] = 0.0  # a head zeroed in place, as an ablation hook would
    got_grad = torch.autograd.grad(got, heads, grad)[0]
    want_grad = _per_head(norm, w, stream, grad * torch.tensor([1.0, 0.0, 1.0, 1.0])[:, None])[1]
    torch.testing.assert_close(got_grad, want_grad, atol=1e-6, rtol=1e-5)
    assert got_grad[:, :, 1].abs().max() == 0 and got_grad[:, :, 0].abs().max() > 0.1
