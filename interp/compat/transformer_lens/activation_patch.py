"""TransformerLens's ``generic_activation_patch`` and patch setters, run the way interp patches.

TransformerLens patches one index at a time: for every row of an index table (``layer, pos``, ``layer, head``,
``layer, head_index, dest_pos``...) it runs the corrupted input once with a *patch setter* copying that slice of
the clean activation in, and records ``patching_metric(logits)``. Here many index rows share one forward pass:
the corrupted input is repeated once per row along the batch (:func:`interp.analysis.conditions.run_conditions`,
as :func:`interp.analysis.patch` runs its slots, with the same token budget per pass), each copy of the
activation gets its own row's setter, so a setter written for TransformerLens (``fn(corrupted_activation,
index, clean_activation)``, editing in place and returning the activation) works unchanged, and the metric sees
each copy's logits ``[batch, pos, d_vocab]``, as it would after one TransformerLens run.

Heads are query heads except for ``k`` and ``v`` in a model with fewer key/value heads, where they are the
key/value heads (as in TransformerLens).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import torch

from interp.analysis.conditions import run_conditions
from interp.analysis.patching import TOKEN_BUDGET
from interp.compat.transformer_lens.utils import get_act_name

AXES = ("layer", "pos", "head_index", "head", "src_pos", "dest_pos")
"""The index axes TransformerLens's patching understands; ``head`` and ``head_index`` are the same axis."""

PatchSetter = Callable[[torch.Tensor, Sequence[int], torch.Tensor], Any]
"""``setter(corrupted_activation, index, clean_activation) -> patched activation`` (editing in place is fine)."""


def make_df_from_ranges(column_max_ranges: Sequence[int], column_names: Sequence[str]) -> pd.DataFrame:
    """Every combination of ``range(m)`` for each column's ``m``, the last column changing fastest.

    >>> make_df_from_ranges([2, 2], ["layer", "pos"]).values.tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    """
    rows = list(itertools.product(*(range(int(m)) for m in column_max_ranges)))
    return pd.DataFrame(rows, columns=list(column_names))


def _axis_sizes(model: Any, activation_name: str, n_pos: int) -> dict[str, int]:
    """How many values each index axis takes for ``activation_name`` on inputs of ``n_pos`` positions."""
    cfg = model.cfg
    heads = cfg.n_heads
    if get_act_name(activation_name, 0).rsplit(".", 1)[-1] in ("hook_k", "hook_v"):
        heads = getattr(cfg, "n_kv_heads", None) or heads
    sizes = dict.fromkeys(("pos", "src_pos", "dest_pos"), n_pos)
    sizes.update(layer=cfg.n_layers, head_index=heads, head=heads)
    return sizes


def generic_activation_patch(
    model: Any,
    corrupted_tokens: torch.Tensor,
    clean_cache: Any,
    patching_metric: Callable[[torch.Tensor], Any],
    patch_setter: PatchSetter,
    activation_name: str,
    index_axis_names: Sequence[str] | None = None,
    index_df: pd.DataFrame | None = None,
    return_index_df: bool = False,
    *,
    batch_size: int | None = None,
) -> torch.Tensor | tuple[torch.Tensor, pd.DataFrame]:
    """``patching_metric`` of the corrupted run with each index's slice of ``activation_name`` patched in.

    Args:
        model: the model (the face's ``HookedTransformer``, or any interp model).
        corrupted_tokens: ``[batch, pos]`` ids of the corrupted run.
        clean_cache: the clean run's cache, holding ``activation_name`` at every layer indexed.
        patching_metric: ``metric(logits [batch, pos, d_vocab]) -> number`` (a float or a one-element tensor).
        patch_setter: copies the indexed slice of the clean activation into the corrupted one; the index's
            first entry is the layer.
        activation_name: TransformerLens's short name (``"resid_pre"``, ``"z"``, ``"pattern"``...).
        index_axis_names: axes to sweep fully (from :data:`AXES`); the result has one axis per name.
        index_df: instead, the rows to patch, one column per axis; the result is flat, one value per row.
        return_index_df: also return the table of indices.
        batch_size: index rows per forward pass (default: as many as fit in interp's patching budget of
            tokens per pass).

    Returns:
        The metric per index (on the model's device), and the index table with ``return_index_df``.

    Raises:
        ValueError: neither or both of ``index_axis_names`` and ``index_df``, an unknown axis, a cache without
            the activation, or a metric that does not return one number.
    """
    tokens = torch.as_tensor(corrupted_tokens)
    if tokens.ndim == 1:
        tokens = tokens[None]
    if (index_axis_names is None) == (index_df is None):
        raise ValueError(
            "give index_axis_names (axes to sweep) or index_df (rows to patch), exactly one of them; got "
            f"{'both' if index_df is not None else 'neither'}"
        )
    if index_df is None:
        sizes = _axis_sizes(model, activation_name, tokens.shape[-1])
        unknown = [name for name in index_axis_names if name not in sizes]
        if unknown or not index_axis_names or index_axis_names[0] != "layer":
            raise ValueError(
                f"index_axis_names={list(index_axis_names)}: they must start with 'layer' and come from "
                f"{list(AXES)}" + (f" ({unknown} are not)" if unknown else "")
            )
        shape = [sizes[name] for name in index_axis_names]
        index_df = make_df_from_ranges(shape, index_axis_names)
    else:
        shape = [len(index_df)]
    rows = [[int(value) for value in row] for row in index_df.itertuples(index=False)]
    names = [get_act_name(activation_name, row[0]) for row in rows]
    for name in dict.fromkeys(names):
        if name not in clean_cache:
            raise ValueError(
                f"the clean cache has no {name!r}; run the clean input with run_with_cache and no "
                "names_filter (or one that keeps it)"
            )
    if batch_size is None:
        batch_size = max(1, TOKEN_BUDGET // tokens.numel())
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}; it must be at least 1 (index rows per forward pass)")
    values: list[float] = []
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            chunk = range(start, min(start + batch_size, len(rows)))
            by_hook: dict[str, list[tuple[int, list[int]]]] = defaultdict(list)
            for copy, i in enumerate(chunk):
                by_hook[names[i]].append((copy, rows[i]))
            hooks = [
                (name, _apply_setter(patch_setter, clean_cache[name], entries))
                for name, entries in by_hook.items()
            ]
            for logits in run_conditions(model, tokens.to(model.device), hooks, copies=len(chunk)):
                values.append(_number(patching_metric(logits)))
    result = torch.tensor(values, dtype=torch.float32, device=model.device).reshape(shape)
    return (result, index_df) if return_index_df else result


def _apply_setter(setter: PatchSetter, clean: torch.Tensor, entries: list[tuple[int, list[int]]]):
    """A hook on ``[copy, batch, ...]`` that runs ``setter`` on each listed copy with its index."""

    def patch(acts: torch.Tensor, hook: Any) -> torch.Tensor:
        if tuple(clean.shape) != tuple(acts.shape[1:]):
            raise ValueError(
                f"the clean activation of {hook.name!r} has shape {tuple(clean.shape)} but the corrupted run's "
                f"has {tuple(acts.shape[1:])}; clean and corrupted inputs must have the same [batch, pos]"
            )
        acts = acts.clone()  # the setter edits in place; the model's own tensor stays as it was
        source = clean.to(acts.device, acts.dtype)
        for copy, index in entries:
            view = acts[copy]
            out = setter(view, index, source)
            if out is not None and out is not view:
                view.copy_(out)
        return acts

    return patch


def _number(value: Any) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"patching_metric returned a tensor of shape {list(value.shape)}; it must return one number for "
                "the whole batch (e.g. the mean logit difference)"
            )
        return float(value.item())
    return float(value)


# Patch setters: the index's first entry is the layer (it chose the hook); the rest pick the slice copied.


def _slice_setter(n_index: int, every_position: bool, doc: str) -> PatchSetter:
    """A setter copying ``clean[:, *index[1:]]`` (``clean[:, :, *index[1:]]`` with ``every_position``)."""

    def setter(corrupted_activation, index, clean_activation):
        if len(index) != n_index:
            raise ValueError(f"this setter takes an index of {n_index} entries, got {list(index)}")
        where = (slice(None),) * (2 if every_position else 1) + tuple(index[1:])
        corrupted_activation[where] = clean_activation[where]
        return corrupted_activation

    setter.__doc__ = doc
    return setter


layer_pos_patch_setter = _slice_setter(
    2, False, "Patch position ``pos`` of an activation ``[batch, pos, ...]``; ``index = [layer, pos]``."
)
layer_pos_head_vector_patch_setter = _slice_setter(
    3,
    False,
    "Patch one head at one position of ``[batch, pos, head, d_head]``; ``index = [layer, pos, head]``.",
)
layer_head_vector_patch_setter = _slice_setter(
    2, True, "Patch one head at every position of ``[batch, pos, head, d_head]``; ``index = [layer, head]``."
)
layer_head_pattern_patch_setter = _slice_setter(
    2,
    False,
    "Patch one head of a pattern or scores ``[batch, head, query, key]``; ``index = [layer, head]``.",
)
layer_head_pos_pattern_patch_setter = _slice_setter(
    3,
    False,
    "Patch one query row of a head's pattern ``[batch, head, query, key]``; ``index = [layer, head, dest]``.",
)
layer_head_dest_src_pos_pattern_patch_setter = _slice_setter(
    4, False, "Patch one (query, key) entry of a head's pattern; ``index = [layer, head, dest, src]``."
)
