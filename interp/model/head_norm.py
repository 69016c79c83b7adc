"""The norm before attention and the query/key/value projection on split inputs, computed once per position
when every head reads one stream.

With split inputs each query head and each key/value head reads a stream of its own, ``[batch, pos, head,
d_model]``, normalised and projected by that head's weights. Unless a hook has edited them, those streams are
one stream broadcast over the heads (a head axis of stride 0; so is the corrupted stream a patched run puts
there), and so are their norms. :func:`project_heads` then normalises one row per position and projects it
with one matrix product, as the unsplit model does, while the backward pass still gives each head the
gradient of its own stream, which is what edge attribution reads at ``hook_q_input`` and the others.

That gradient is formed in two passes over ``[head, batch * pos, d_model]``: one batched product, whose
weights carry the norm's gain (and, for LayerNorm, its centring) and whose inputs carry each position's
``1 / scale``, and one in-place correction along the normalised row. Normalising every head's copy, or
applying the norm's backward to every head's gradient after the product, costs several more passes over a
tensor the size of the heads' inputs, for the same numbers.

The shortcut is taken only when it cannot change a result: the head axis has stride 0, nothing hooks the
norm's ``hook_scale`` or ``hook_normalized``, and, when the streams' gradients are recorded, neither the norm's
weights nor the projection require gradients (the shortcut's backward gives the streams' gradients only).
Otherwise the norm runs per head and the heads are projected one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from interp.model.layout import merge_heads_in
from interp.model.norm import Norm


@dataclass(frozen=True, eq=False)
class InputNorm:
    """The norm split inputs pass through before the projections, as a block hands it to its attention: a plain
    object, not the module itself, since a device map's hooks move every module among a call's arguments to
    the call's device (and an offloaded module has no weights to move outside its own call)."""

    module: Norm


def project_heads(norm: Norm | None, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``einsum("bphd,hde->bphe", norm(x), w)`` for per-head streams ``x [batch, pos, head, d_model]`` and
    weights ``w [head, d_model, d_head]``, computed once per position where the heads share a stream."""
    # (a norm placed on another device than the projection returns its output there)
    if norm is not None and _shared(norm, x, w):
        if not (torch.is_grad_enabled() and x.requires_grad):  # one row per position; weights' gradients hold
            return _project_row(norm(x[:, :, 0]).to(w.device), w)
        if not (w.requires_grad or any(p.requires_grad for p in norm.parameters())):
            # the function returns [batch, pos, head * d_head]: an output that is a view made inside it could
            # not be edited in place, as hooks on q, k and v may
            return _SharedNormProjection.apply(x, norm, w).unflatten(-1, (w.shape[0], w.shape[2]))
    normed = x if norm is None else norm(x).to(w.device)  # every head's stream on its own
    return torch.einsum("bphd,hde->bphe", normed, w)  # [batch, pos, head, d_head]


def _shared(norm: Norm, x: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether every head reads the same stream and the shortcut may read the norm's and the heads' weights.

    An offloaded norm (a device map with disk or CPU offload) has real weights only inside its own call, and
    the shortcut's backward reads the gain outside it: such a norm runs per head."""
    hooked = norm.hook_scale.active or norm.hook_normalized.active
    return x.shape[2] > 1 and x.stride(2) == 0 and not (norm.w.is_meta or w.is_meta or hooked)


def _project_row(row: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``row [batch, pos, d_model]`` through every head of ``w`` -> ``[batch, pos, head, d_head]``."""
    return _project_flat(row, w).unflatten(-1, (w.shape[0], w.shape[2]))


def _project_flat(row: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``row [..., d_model]`` through every head of ``w`` -> ``[..., head * d_head]``."""
    return F.linear(row, merge_heads_in(w).T)


class _SharedNormProjection(torch.autograd.Function):
    """Forward: the norm of one row per position, projected by every head. Backward: each head's gradient at
    its own stream, in float32 (as the norm computes its statistics)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, norm: Norm, w: torch.Tensor) -> torch.Tensor:
        row = x[:, :, 0]  # [batch, pos, d_model]
        out = _project_flat(norm(row).to(w.device), w)  # [batch, pos, head * d_head]
        # out - bias @ W is the gain times the normalised row, projected: the backward's dot products need it
        bias = torch.zeros(()) if norm.b is None else _project_flat(norm.b.detach(), w)  # [head * d_head]
        ctx.save_for_backward(
            row, norm.gain.detach().clone(), w.detach(), bias
        )  # the weights as they are now
        ctx.kind, ctx.eps, ctx.dtype = norm.kind, norm.eps, x.dtype
        # Kept outside save_for_backward, so that a hook editing q, k or v in place is no error: the backward
        # then computes the dot products from the gradients instead.
        ctx.out, ctx.out_version = out.detach(), out._version
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        row, gain, w, bias = ctx.saved_tensors
        (batch, n_pos, _), (n_heads, _, d_head) = grad.shape, w.shape
        width = row.shape[-1]
        x = row.float().reshape(batch * n_pos, width)  # [batch * pos, d_model]
        if ctx.kind == "layernorm":
            x = x - x.mean(-1, keepdim=True)
        inv_scale = (x.pow(2).mean(-1, keepdim=True) + ctx.eps).rsqrt()  # [batch * pos, 1]
        normalized = x * inv_scale  # [batch * pos, d_model]
        # The gradient g_h = grad_h @ W_h^T at the norm's output becomes, at its input,
        #   d_h = inv_scale * gain * g_h [- its mean over d_model] - (d_h . normalized / d_model) * normalized.
        # The first term is one batched product: 1 / scale scales grad's rows, the gain (centred over d_model
        # for LayerNorm, whose normalized row has mean 0) scales W^T's columns. The dot product is read off
        # the projection: d_h . normalized = inv_scale * grad_h . ((gain * normalized) @ W_h).
        weights = w.to(grad.device, torch.float32).transpose(1, 2) * gain.to(
            grad.device
        )  # [head, d_head, d_model]
        if ctx.kind == "layernorm":
            weights = weights - weights.mean(-1, keepdim=True)
        scaled = grad.float().reshape(batch * n_pos, n_heads, d_head) * inv_scale[:, :, None]
        d_x = torch.bmm(scaled.transpose(0, 1), weights)  # [head, batch * pos, d_model]
        if ctx.out._version == ctx.out_version:  # (gain * normalized) @ W, as the forward computed it
            projected = (ctx.out.float() - bias.float()).reshape(batch * n_pos, n_heads, d_head)
            dots = (scaled * projected).sum(-1, keepdim=True) / width  # [batch * pos, head, 1]
        else:
            dots = torch.bmm(d_x.transpose(0, 1), normalized[:, :, None]) / width
        d_x.addcmul_(dots.transpose(0, 1), normalized[None], value=-1)
        d_x = d_x.unflatten(1, (batch, n_pos)).permute(1, 2, 0, 3)  # [batch, pos, head, d_model]
        return d_x.to(ctx.dtype), None, None
