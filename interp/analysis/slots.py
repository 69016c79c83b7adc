"""Which axes of an activation hold positions and heads, and boolean masks that select some of them.

Patching, ablation and attribution all act on a *slot* of an activation: one position, one head, both, or the
whole tensor. The hook contract fixes where those axes are: ``[batch, pos, ...]`` for the stream and MLP,
``[batch, pos, head, d_head]`` for per-head projections and results, ``[batch, head, query, key]`` for scores
and patterns (where "position" means the query).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from interp.analysis.checks import check_indices

_HEAD_FIRST = {"hook_attn_scores", "hook_pattern"}  # [batch, head, query, key]
_PER_HEAD = {"hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_z", "hook_result"}
PER_HEAD_HOOKS = "attn.hook_q/k/v/rot_q/rot_k/z/result/attn_scores/pattern"


def slot_axes(name: str) -> tuple[int, int | None]:
    """``(position_axis, head_axis)`` of the activation named ``name`` (``head_axis`` is None without heads).

    >>> slot_axes("blocks.0.attn.hook_pattern"), slot_axes("blocks.0.attn.hook_z"), slot_axes("hook_embed")
    ((2, 1), (1, 2), (1, None))
    """
    leaf = name.rsplit(".", 1)[-1]
    if ".attn." in name and leaf in _HEAD_FIRST:
        return 2, 1
    if ".attn." in name and leaf in _PER_HEAD:
        return 1, 2
    return 1, None


def slot_mask(
    name: str,
    shape: Sequence[int],
    positions: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
) -> torch.Tensor:
    """A boolean mask broadcastable to ``shape``, True on the chosen positions and heads (None: all).

    >>> slot_mask("blocks.0.attn.hook_z", (1, 3, 2, 4), positions=1, heads=[0]).squeeze().tolist()
    [[False, False], [True, False], [False, False]]
    """
    pos_axis, head_axis = slot_axes(name)
    if heads is not None and head_axis is None:
        raise ValueError(
            f"heads={heads!r} was given but {name!r} has no head axis; per-head hooks are {PER_HEAD_HOOKS}"
        )
    n_pos = shape[pos_axis]
    size = [1] * len(shape)
    size[pos_axis] = n_pos
    pos_mask = torch.zeros(n_pos, dtype=torch.bool)
    pos_mask[check_indices(positions, n_pos, "position", f"{name!r} with {n_pos} positions")] = True
    mask = pos_mask.reshape(size)
    if head_axis is not None:
        n_heads = shape[head_axis]
        head_size = [1] * len(shape)
        head_size[head_axis] = n_heads
        head_mask = torch.zeros(n_heads, dtype=torch.bool)
        head_mask[check_indices(heads, n_heads, "head", f"{name!r} with {n_heads} heads")] = True
        mask = mask & head_mask.reshape(head_size)
    return mask


def reduce_to_slots(name: str, x: torch.Tensor, by: str) -> torch.Tensor:
    """Sum ``x`` (shaped like the activation) over everything but the axes ``by`` keeps.

    Returns ``[pos]`` for ``"position"``, ``[head]`` for ``"head"``, ``[pos, head]`` for ``"head_position"``
    and a 0-d tensor for ``"layer"``.
    """
    pos_axis, head_axis = slot_axes(name)
    if by == "layer":
        return x.sum()
    if by in ("head", "head_position") and head_axis is None:
        raise ValueError(
            f"by={by!r} needs an activation with a head axis; {name!r} has none ({PER_HEAD_HOOKS} do)"
        )
    keep = {"position": [pos_axis], "head": [head_axis], "head_position": [pos_axis, head_axis]}[by]
    summed = x.sum(dim=[d for d in range(x.ndim) if d not in keep])
    if by == "head_position" and head_axis < pos_axis:
        summed = summed.T  # [pos, head]
    return summed


def slots_of(name: str, shape: Sequence[int], by: str) -> list[tuple[int | None, int | None]]:
    """Every ``(position, head)`` slot of an activation, in the order of :func:`reduce_to_slots`."""
    pos_axis, head_axis = slot_axes(name)
    if by == "layer":
        return [(None, None)]
    if by in ("head", "head_position") and head_axis is None:
        raise ValueError(
            f"by={by!r} needs an activation with a head axis; {name!r} has none ({PER_HEAD_HOOKS} do)"
        )
    if by == "position":
        return [(p, None) for p in range(shape[pos_axis])]
    if by == "head":
        return [(None, h) for h in range(shape[head_axis])]
    if by == "head_position":
        return [(p, h) for p in range(shape[pos_axis]) for h in range(shape[head_axis])]
    raise ValueError(f"by={by!r}; expected one of 'position', 'head', 'head_position', 'layer'")
