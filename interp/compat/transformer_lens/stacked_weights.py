"""The model's weights stacked across layers, ``[layer, head, ...]``, as interpretability code indexes them.

``W_Q`` is ``[layer, head, d_model, d_head]``; ``W_K`` and ``W_V`` are ``[layer, kv_head, d_model, d_head]`` and,
with ``ungroup=True``, ``[layer, head, d_model, d_head]``: each query head gets its own copy of the key/value
head it reads (head ``h`` reads ``h // (n_heads // n_kv_heads)``), which is what per-head circuits such as
``W_Q @ W_K.T`` need under grouped-query attention. Stacks are new tensors (``torch.stack``); editing one does
not edit the model.
"""

from __future__ import annotations

import torch
from torch import nn

_ATTN = {"W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"}
_MLP = {"W_in", "W_gate", "W_out", "b_in", "b_gate", "b_out"}
_KV = {"W_K", "W_V", "b_K", "b_V"}


def stacked(model: nn.Module, name: str, *, ungroup: bool = False) -> torch.Tensor | None:
    """One weight of every block, stacked on a new leading ``layer`` axis; ``None`` if the blocks lack it.

    Args:
        model: an interp :class:`~interp.HookedTransformer`.
        name: ``W_Q``, ``W_K``, ``W_V``, ``W_O``, their biases ``b_Q``..., or ``W_in``, ``W_gate``, ``W_out``,
            ``b_in``, ``b_gate``, ``b_out`` (of a mixture-of-experts model: the routed experts', with an
            ``expert`` axis after ``layer``; a model mixing dense and MoE layers raises).
        ungroup: repeat key/value weights along the head axis so there is one per query head.
    """
    if name not in _ATTN | _MLP:
        raise KeyError(f"{name!r} is not a per-block weight; expected one of {sorted(_ATTN | _MLP)}")
    owner = "attn" if name in _ATTN else "mlp"
    weights = [getattr(getattr(block, owner), name) for block in model.blocks]
    if any(w is None for w in weights):
        return None
    shapes = {tuple(w.shape) for w in weights}
    if len(shapes) > 1:  # a mixture-of-experts model with dense layers: [expert, ...] here, [...] there
        raise ValueError(
            f"{name} has different shapes in different layers ({sorted(shapes)}): the layers' MLPs are "
            f"{list(model.cfg.mlp_types)}; read model.blocks[layer].mlp.{name} per layer"
        )
    out = torch.stack(list(weights))  # [layer, ...] (mixture-of-experts MLPs: [layer, expert, ...])
    group = model.cfg.n_heads // model.cfg.n_kv_heads
    if ungroup and name in _KV and group > 1:
        out = out.repeat_interleave(group, dim=1)  # [layer, head, ...]
    return out
