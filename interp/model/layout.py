"""Parameters whose logical shape is ours but whose memory layout is that of ``nn.Linear``.

Weights read as ``x @ W`` with per-head axes (``W_Q: [head, d_model, d_head]``) are what interpretability code
wants to index. Stored naively, merging the head axes for one matrix multiply would copy them on every forward.
Allocating the storage in ``nn.Linear``'s ``[out, in]`` order and exposing a permuted view gives both: the
per-head view for users and a copy-free ``[d_model, n_heads * d_head]`` matrix for the fast path, the same
BLAS call that ``transformers`` makes.
"""

from __future__ import annotations

import torch
from torch import nn


def param_in_layout(shape: tuple[int, ...], storage_order: tuple[int, ...]) -> nn.Parameter:
    """An uninitialised parameter of ``shape`` stored with dimensions in ``storage_order`` (outermost first).

    >>> w = param_in_layout((2, 8, 4), (0, 2, 1))  # [head, d_model, d_head], stored [head, d_head, d_model]
    >>> w.shape, w.stride()
    (torch.Size([2, 8, 4]), (32, 1, 8))
    """
    storage = torch.empty([shape[i] for i in storage_order])
    inverse = tuple(storage_order.index(i) for i in range(len(shape)))
    return nn.Parameter(storage.permute(inverse))


def merge_heads_in(w: torch.Tensor) -> torch.Tensor:
    """``[head, d_model, d_head]`` -> ``[d_model, head * d_head]``, a view when stored head-major."""
    return w.permute(1, 0, 2).reshape(w.shape[1], -1)


def merge_heads_out(w: torch.Tensor) -> torch.Tensor:
    """``[head, d_head, d_model]`` -> ``[head * d_head, d_model]``, a view when stored ``[d_model, ...]``."""
    return w.reshape(-1, w.shape[-1])
