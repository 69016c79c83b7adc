"""TopK's pre-activations with a gradient at the chosen latents only, for training.

A TopK dictionary's loss depends on ``k`` of a token's ``d_sae`` pre-activations, so only those carry a
gradient. Autograd through the dense ``pre = x @ W.T + b`` does not know it: its backward pass runs two more
products as large as the encoder (``grad_pre.T @ x`` for ``W`` and ``grad_pre @ W`` for the input), over a
gradient that is zero but for ``k`` entries a row. :func:`selected_pre_acts` computes ``pre`` outside the
graph, lets the caller choose latents on it, and gives back the chosen entries as a function of ``x``, ``W``
and ``b`` whose backward pass reads only them: ``W``'s gradient is a sparse ``[latents, rows] @ [rows, d]``
product (``rows * k`` terms, one per chosen entry), ``b``'s an index sum, and the gradient of a centre
subtracted from the input (an SAE's ``b_dec``) the product of ``b``'s gradient with ``W``. Its forward values
are the dense pre-activations' own, bit for bit; its gradients are the dense backward pass's to float rounding
(the same non-zero terms, summed in another order). The decoder's side needs nothing new: an embedding bag of
the chosen decoder rows is already sparse in both passes (:meth:`interp.sae.latents.Active.decode`).

Several dictionaries of one width (a transcoder set's layers, a CLT's) go through at once: the layer is the
middle axis of ``x``, ``pre`` and the chosen indices, and the first of ``W`` and ``b``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


class _Selected(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x, weight, bias, centre, pre, indices):  # noqa: ANN001, ANN205 - autograd's signature
        ctx.save_for_backward(x, weight, centre, indices)
        return pre.gather(-1, indices)  # [rows, n, m]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor):  # noqa: ANN205
        x, weight, centre, indices = ctx.saved_tensors
        rows, n, m = indices.shape
        n_latents, d = weight.shape[1:]
        # Each chosen entry's latent among all n layers' latents, and the row of x (rows * n of them) it read.
        latent = (indices + torch.arange(n, device=indices.device)[:, None] * n_latents).reshape(-1)
        read = torch.arange(rows * n, device=indices.device).repeat_interleave(m)
        values = grad.reshape(-1).to(weight.dtype)
        grad_x = grad_w = grad_b = grad_c = None
        need_x, need_w, need_b, need_c = ctx.needs_input_grad[:4]
        if need_x:
            table = weight.reshape(n * n_latents, d)
            grad_x = F.embedding_bag(
                latent.view(rows * n, m), table, per_sample_weights=values.view(rows * n, m), mode="sum"
            ).view(rows, n, d)
        if need_w:
            inputs = x.reshape(rows * n, d) if centre is None else (x - centre).reshape(rows * n, d)
            chosen = torch.sparse_coo_tensor(
                torch.stack([latent, read]), values, (n * n_latents, rows * n), check_invariants=False
            )  # [latents, rows]: the gradient of each chosen entry
            grad_w = torch.sparse.mm(chosen, inputs).view(n, n_latents, d)
        if need_b or need_c:
            summed = values.new_zeros(n * n_latents).index_add_(0, latent, values).view(n, n_latents)
            grad_b = summed if need_b else None
            if need_c:  # d pre / d centre = -W: every row's gradient, summed (the centre is one vector)
                grad_c = -torch.einsum("nf,nfd->d", summed, weight)
        return grad_x, grad_w, grad_b, grad_c, None, None


def selected_pre_acts(
    pre: torch.Tensor,
    indices: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    centre: torch.Tensor | None = None,
) -> torch.Tensor:
    """``pre.gather(-1, indices)``, differentiable in ``x``, ``weight``, ``bias`` and ``centre`` through the
    chosen entries only (see the module docstring).

    Args:
        pre: ``[rows, n, n_latents]``: ``(x - centre) @ weight[i].T + bias[i]`` for each layer ``i``, computed
            by the caller without a graph (its values are returned as they are).
        indices: ``[rows, n, m]``: the latents chosen in each row and layer.
        x: ``[rows, n, d]``: the input.
        weight: ``[n, n_latents, d]``: encoder rows (a transposed view will do).
        bias: ``[n, n_latents]``.
        centre: ``[d]`` subtracted from every input before encoding (an SAE's ``b_dec``), or ``None``.

    Returns:
        ``[rows, n, m]``.
    """
    return _Selected.apply(x, weight, bias, centre, pre, indices)
