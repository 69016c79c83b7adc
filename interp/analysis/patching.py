"""Activation patching: copy activations of a clean run into a corrupt run, one slot at a time.

The question is causal: how much of the clean behaviour (measured by ``metric(logits, batch)``, averaged over
the batch's rows; see :mod:`interp.analysis.metric`) comes back when
a single activation slot (a position, a head, or both, of one hook) takes its clean value inside the corrupt
run?
The answer is reported as the raw metric and as the normalised recovery
``(patched - corrupt) / (clean - corrupt)``: 0 means the slot carries nothing that matters, 1 means it carries
everything. Many patches share one forward pass: the corrupt input is repeated along the batch and each copy
has a different slot patched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import check_indices, check_same_shape
from interp.analysis.conditions import run_conditions
from interp.analysis.effect import normalised_effect
from interp.analysis.metric import Batch, Metric, check_signature, mean_metric, run_batches
from interp.analysis.slots import slot_axes, slot_mask, slots_of

BY = ("position", "head", "head_position", "layer")
TOKEN_BUDGET = 8192  # tokens per patched forward when batch_size is not given


@dataclass(frozen=True)
class Slot:
    """One patch: the whole of ``hook`` (both None), one position, one head, or one head at one position."""

    hook: str
    position: int | None = None
    head: int | None = None


def hook_names_for(model: nn.Module, hook_name: str | Sequence[str]) -> list[str]:
    """Expand a name, a glob, a list, or a template with ``{layer}`` (one per block) into checked hook names.

    >>> from interp import HookedTransformer, TransformerConfig
    >>> model = HookedTransformer(TransformerConfig(n_layers=2, d_model=8, n_heads=2, d_vocab=10, n_ctx=4))
    >>> hook_names_for(model, "blocks.{layer}.hook_resid_pre")
    ['blocks.0.hook_resid_pre', 'blocks.1.hook_resid_pre']
    """
    if isinstance(hook_name, str) and "{layer}" in hook_name:
        hook_name = [hook_name.format(layer=layer) for layer in range(model.cfg.n_layers)]
    return model.resolve(hook_name)


def check_by(by: str) -> None:
    if by not in BY:
        raise ValueError(f"by={by!r}; expected one of {list(BY)}")


def _patch_fn(source: torch.Tensor, rows: list[tuple[int, Slot]], n: int):
    def patch_rows(act: torch.Tensor, hook) -> torch.Tensor:
        # act: [patch, batch, ...]
        if tuple(source.shape) != tuple(act.shape[1:]):
            raise ValueError(
                f"the source activation of {hook.name!r} has shape {tuple(source.shape)} but the target "
                f"run's has shape {tuple(act.shape[1:])}; source and target must have the same [batch, pos]"
            )
        mask = torch.zeros((n, *act.shape[1:]), dtype=torch.bool)
        for i, slot in rows:
            mask[i] = slot_mask(hook.name, act.shape[1:], slot.position, slot.head)
        return torch.where(mask.to(act.device), source.to(act.device, act.dtype), act)

    return patch_rows


@torch.no_grad()
def run_slots(
    model: nn.Module,
    source: ActivationCache,
    target: Batch,
    slots: Sequence[Slot],
    metric: Metric,
    *,
    batch_size: int | None = None,
) -> list[float]:
    """``metric``'s mean over the target run with each slot patched from ``source`` (one value per slot)."""
    if batch_size is None:
        batch_size = max(1, TOKEN_BUDGET // target.tokens.numel())
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}; it must be at least 1 (patches per forward pass)")
    values: list[float] = []
    for start in range(0, len(slots), batch_size):
        chunk = slots[start : start + batch_size]
        n = len(chunk)
        rows: dict[str, list[tuple[int, Slot]]] = defaultdict(list)
        for i, slot in enumerate(chunk):
            rows[slot.hook].append((i, slot))
        hooks = [(name, _patch_fn(source[name], hook_rows, n)) for name, hook_rows in rows.items()]
        parts = run_conditions(model, target.tokens, hooks, copies=n, attention_mask=target.attention_mask)
        for i, part in enumerate(parts):
            values.append(float(mean_metric(metric, part, target, f"for the patch {chunk[i]}")))
    return values


@torch.no_grad()
def run_patched(
    model: nn.Module,
    target_tokens: torch.Tensor,
    source: torch.Tensor | ActivationCache,
    hook_name: str | Sequence[str],
    *,
    positions: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logits of the target run with the chosen positions and heads of ``hook_name`` taken from ``source``.

    Args:
        source: the source tokens (run with the same ``attention_mask``) or a cache holding the hooks.
        positions, heads: which slots to patch; ``None`` patches all, an empty list none.
    """
    names = hook_names_for(model, hook_name)
    if not isinstance(source, ActivationCache):
        check_same_shape(source, target_tokens)
        source = model.run_with_cache(source, attention_mask, names_filter=names)[1]

    def overwrite(act: torch.Tensor, hook) -> torch.Tensor:
        src = source[hook.name]
        if tuple(src.shape) != tuple(act.shape):
            raise ValueError(
                f"the source activation of {hook.name!r} has shape {tuple(src.shape)} but the target "
                f"run's has shape {tuple(act.shape)}; source and target must have the same [batch, pos]"
            )
        mask = slot_mask(hook.name, act.shape, positions, heads).to(act.device)
        return torch.where(mask, src.to(act.device, act.dtype), act)

    return model.run_with_hooks(target_tokens, attention_mask, fwd_hooks=[(names, overwrite)])


def slot_frame(
    model: nn.Module, slots: Sequence[Slot], by: str, deltas: Sequence[float], clean: float, corrupt: float
) -> pd.DataFrame:
    """One row per slot: ``hook, layer, [position], [head], delta, value = delta / (clean - corrupt)``."""
    frame = pd.DataFrame(
        {
            "hook": [s.hook for s in slots],
            "layer": pd.array([model.hook_dict[s.hook].layer for s in slots], dtype="Int64"),
            "position": pd.array([s.position for s in slots], dtype="Int64"),
            "head": pd.array([s.head for s in slots], dtype="Int64"),
            "delta": list(deltas),
        }
    )
    frame["value"] = normalised_effect(frame["delta"], clean, corrupt, what="the normalised recovery")
    drop = [c for c, keep in (("position", "position" in by), ("head", "head" in by)) if not keep]
    frame = frame.drop(columns=drop)
    frame.attrs.update(clean_metric=clean, corrupt_metric=corrupt)
    return frame


def sweep_slots(
    model: nn.Module,
    names: Sequence[str],
    shapes: dict[str, torch.Size],
    by: str,
    positions: int | Sequence[int] | None,
    heads: int | Sequence[int] | None,
) -> list[Slot]:
    """Every slot of every hook for ``by``, restricted to ``positions`` and ``heads`` when given."""
    slots = []
    for name in names:
        pos_axis, head_axis = slot_axes(name)
        shape = shapes[name]
        keep_pos = set(
            check_indices(
                positions, shape[pos_axis], "position", f"{name!r} with {shape[pos_axis]} positions"
            )
        )
        keep_head = None
        if heads is not None:
            if head_axis is None:
                raise ValueError(f"heads={heads!r} was given but {name!r} has no head axis")
            keep_head = set(
                check_indices(heads, shape[head_axis], "head", f"{name!r} with {shape[head_axis]} heads")
            )
        for p, h in slots_of(name, shape, by):
            if (p is None or p in keep_pos) and (h is None or keep_head is None or h in keep_head):
                slots.append(Slot(name, p, h))
    return slots


@torch.no_grad()
def patch(
    model: nn.Module,
    clean_tokens: torch.Tensor,
    corrupt_tokens: torch.Tensor,
    hook_name: str | Sequence[str],
    metric: Metric,
    by: str = "position",
    *,
    positions: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
    attention_mask: torch.Tensor | None = None,
    labels: Mapping[str, torch.Tensor] | None = None,
    batch_size: int | None = None,
) -> pd.DataFrame:
    """Patch each slot of ``hook_name`` from the clean run into the corrupt run and measure ``metric``.

    Args:
        model: the model.
        clean_tokens, corrupt_tokens: ``[batch, pos]`` of the same shape; a patch applies to every row.
        hook_name: one name, a glob or list (``"blocks.*.hook_resid_pre"``), or a template with ``{layer}``.
        metric: ``metric(logits [batch, pos, d_vocab], batch) -> [batch]``, one value per row, averaged here
            (e.g. :func:`~interp.analysis.logit_difference` with ``labels``); ``batch`` is a
            :class:`~interp.analysis.Batch` of the tokens of the run measured (clean, corrupt or patched).
        by: ``"position"``, ``"head"``, ``"head_position"``, or ``"layer"`` (the whole activation at once).
            Heads are query heads for q, z, result and patterns, key/value heads for k and v; the position
            of a pattern or score is its query.
        positions, heads: restrict the sweep to these (default: all).
        attention_mask: ``[batch, pos]`` used by both runs; positions index the padded tensor.
        labels: per-row tensors ``[batch, ...]`` the metric reads from its batch (``answer``, ``foil``...).
        batch_size: patches per forward pass (default: as many as fit in about 8k tokens).

    Returns:
        A DataFrame with columns ``hook, layer, [position], [head], delta, value``: ``delta`` is the patched
        minus the corrupt metric, ``value`` the normalised recovery. ``frame.attrs`` holds ``clean_metric``
        and ``corrupt_metric``.

    Raises:
        ValueError: the token shapes differ, ``by`` is unknown or needs heads the hook lacks, or the metric
            does not return one value per row. IndexError: a position or head is out of range. TypeError: the
            metric does not take ``(logits, batch)``.
    """
    check_signature(metric)
    check_same_shape(clean_tokens, corrupt_tokens)
    check_by(by)
    names = hook_names_for(model, hook_name)
    clean_run, corrupt_run = run_batches(clean_tokens, corrupt_tokens, attention_mask, labels)
    clean_logits, cache = model.run_with_cache(clean_tokens, attention_mask, names_filter=names)
    clean = float(mean_metric(metric, clean_logits, clean_run, "on the clean run"))
    corrupt_logits = model(corrupt_tokens, attention_mask)
    corrupt = float(mean_metric(metric, corrupt_logits, corrupt_run, "on the corrupt run"))
    slots = sweep_slots(model, names, {n: cache[n].shape for n in names}, by, positions, heads)
    values = run_slots(model, cache, corrupt_run, slots, metric, batch_size=batch_size)
    return slot_frame(model, slots, by, [v - corrupt for v in values], clean, corrupt)
