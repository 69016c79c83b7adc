"""The norm before attention on split inputs, computed once per position when every head reads one stream.

With split inputs each query head and each key/value head reads a stream of its own, ``[batch, pos, head,
d_model]``, and the norm runs on each. Unless a hook has edited them, those streams are one stream broadcast
over the heads (a head axis of stride 0; so is the corrupted stream a patched run puts there), and so are
their norms. Normalising every head's copy costs heads-fold time and, in the autograd graph, heads-fold
memory, for the same numbers. :func:`norm_heads` normalises one row per position and broadcasts it, while
the backward pass still gives each head the gradient of its own stream (the norm's Jacobian at the shared row
applied to each head's gradient), which is what edge attribution reads at ``hook_q_input`` and the others.

The shortcut is taken only when it cannot change a result: the head axis has stride 0, nothing hooks the
norm's ``hook_scale`` or ``hook_normalized``, and, when gradients are recorded, the norm's weights do not
require them (the shortcut's backward gives the input's gradient only). Otherwise the norm runs per head.
"""

from __future__ import annotations

import torch

from interp.model.norm import Norm


def norm_heads(norm: Norm, x: torch.Tensor) -> torch.Tensor:
    """``norm(x)`` for ``x [batch, pos, head, d_model]``, computed once per position where the heads share it."""
    # An offloaded norm (a device map with disk or CPU offload) has real weights only inside its own call, so
    # the shortcut, which reads the gain outside it, leaves it to the norm.
    shared = x.shape[2] > 1 and x.stride(2) == 0 and not norm.w.is_meta
    hooked = norm.hook_scale.active or norm.hook_normalized.active
    if not shared or hooked:
        return norm(x)
    if not torch.is_grad_enabled() or not x.requires_grad:
        return norm(x[:, :, :1]).expand(*x.shape[:3], -1)  # [batch, pos, head, d_model]
    if any(p.requires_grad for p in norm.parameters()):
        return norm(x)
    return _SharedRow.apply(x, norm)


class _SharedRow(torch.autograd.Function):
    """Forward: the norm of one row per position, broadcast over heads. Backward: the norm's vector-Jacobian
    product at that row for each head's gradient, in float32 (as the norm computes its statistics)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, norm: Norm) -> torch.Tensor:
        row = x[:, :, :1]  # [batch, pos, 1, d_model]
        ctx.save_for_backward(row, norm.gain.detach().clone())  # [d_model], as it is now
        ctx.norm = norm
        return norm(row).expand(*x.shape[:3], -1)  # [batch, pos, head, d_model]

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        row, gain = ctx.saved_tensors
        norm: Norm = ctx.norm
        batch, n_pos, n_heads, width = grad.shape
        x = row.float().reshape(batch * n_pos, 1, width)  # [batch * pos, 1, d_model]
        if norm.kind == "layernorm":
            x = x - x.mean(-1, keepdim=True)
        inv_scale = (x.pow(2).mean(-1, keepdim=True) + norm.eps).rsqrt()  # [batch * pos, 1, 1]
        normalized = x * inv_scale
        gain = gain.to(grad.device)  # [d_model]
        g = grad.float().reshape(batch * n_pos, n_heads, width)  # [batch * pos, head, d_model]
        # d x = (g * gain - normalized * mean(g * gain * normalized) [- mean(g * gain)]) / scale: one
        # elementwise pass, the means as matrix products, each correction as one broadcast multiply-add.
        mean = g @ (gain * normalized).transpose(1, 2) / width  # [batch * pos, head, 1]
        d_x = torch.addcmul(g * (gain * inv_scale), mean, normalized * inv_scale, value=-1)
        if norm.kind == "layernorm":  # the mean of g * gain, [batch * pos, head, 1], times 1 / scale
            d_x.addcmul_(g @ gain[:, None] / width, inv_scale, value=-1)
        return d_x.reshape(grad.shape).to(grad.dtype), None
