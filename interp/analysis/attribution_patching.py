"""Attribution patching: a first-order estimate of activation patching from one forward and one backward pass.

Patching a slot changes the metric by about ``(clean_act - corrupt_act) . d metric / d act``, the gradient
taken in the corrupt run (Nanda, "Attribution patching", 2023). One backward pass gives the estimate for every
slot of every hook at once, so it can screen thousands of components; :func:`verify_top_k` then re-checks the
strongest ones by exact patching, since the linear approximation fails where the metric saturates (e.g. after
a softmax that is nearly one-hot, or across a large change in a norm's scale).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from interp.analysis.checks import check_same_shape
from interp.analysis.conditions import run_conditions
from interp.analysis.effect import normalised_effect
from interp.analysis.metric import Batch, Metric, check_signature, mean_metric, run_batches
from interp.analysis.patching import (
    TOKEN_BUDGET,
    Slot,
    check_by,
    hook_names_for,
    slot_frame,
    sweep_slots,
)
from interp.analysis.slots import reduce_to_slots, slot_mask


def attribution_patch(
    model: nn.Module,
    clean_tokens: torch.Tensor,
    corrupt_tokens: torch.Tensor,
    metric: Metric,
    hook_names: str | Sequence[str],
    by: str = "position",
    *,
    attention_mask: torch.Tensor | None = None,
    labels: Mapping[str, torch.Tensor] | None = None,
) -> pd.DataFrame:
    """Estimate :func:`~interp.analysis.patch` for every slot of ``hook_names`` with one gradient.

    Args:
        model: the model; its parameters' ``.grad`` are left untouched.
        clean_tokens, corrupt_tokens: ``[batch, pos]`` of the same shape.
        metric: ``metric(logits, batch) -> [batch]``, differentiable; its mean over the rows is attributed
            (see :func:`~interp.analysis.patch`).
        hook_names: a name, glob, list, or template with ``{layer}``.
        by: ``"position"``, ``"head"``, ``"head_position"`` or ``"layer"``, as in ``patch``.
        attention_mask: ``[batch, pos]`` used by both runs.
        labels: per-row tensors the metric reads from its batch, as in ``patch``.

    Returns:
        The same columns as ``patch``: ``hook, layer, [position], [head], delta, value``, where ``delta``
        is the estimated change of the metric and ``value`` that change over ``clean - corrupt``.
    """
    check_signature(metric)
    check_same_shape(clean_tokens, corrupt_tokens)
    check_by(by)
    names = hook_names_for(model, hook_names)
    clean_run, corrupt_run = run_batches(clean_tokens, corrupt_tokens, attention_mask, labels)
    with torch.no_grad():
        clean_logits, clean_cache = model.run_with_cache(clean_tokens, attention_mask, names_filter=names)
        clean = float(mean_metric(metric, clean_logits, clean_run, "on the clean run"))
    acts: dict[str, torch.Tensor] = {}

    def keep(act: torch.Tensor, hook) -> torch.Tensor | None:
        if not act.requires_grad:  # weights without gradients: make the activation a leaf gradients reach
            act = act.detach().requires_grad_(True)
        acts[hook.name] = act
        return act

    with torch.enable_grad():
        logits = model.run_with_hooks(corrupt_tokens, attention_mask, fwd_hooks=[(names, keep)])
        corrupt_value = mean_metric(metric, logits, corrupt_run, "on the corrupt run")
        grads = torch.autograd.grad(corrupt_value, [acts[n] for n in names], allow_unused=True)
    slots, deltas = [], []
    for name, grad in zip(names, grads, strict=True):
        corrupt_act = acts[name].detach()
        diff = clean_cache[name].to(corrupt_act.dtype) - corrupt_act
        diff = torch.where(
            torch.isfinite(diff), diff, torch.zeros_like(diff)
        )  # masked scores: -inf on both sides
        grad = torch.zeros_like(corrupt_act) if grad is None else grad
        per_slot = reduce_to_slots(name, (diff * grad).float(), by)  # [pos] | [head] | [pos, head] | []
        hook_slots = sweep_slots(model, [name], {name: corrupt_act.shape}, by, None, None)
        slots += hook_slots
        deltas += per_slot.flatten().tolist()
    return slot_frame(model, slots, by, deltas, clean, float(corrupt_value.detach()))


@torch.no_grad()
def verify_top_k(
    model: nn.Module,
    clean_tokens: torch.Tensor,
    corrupt_tokens: torch.Tensor,
    metric: Metric,
    attribution: pd.DataFrame,
    k: int = 10,
    *,
    attention_mask: torch.Tensor | None = None,
    labels: Mapping[str, torch.Tensor] | None = None,
    batch_size: int | None = None,
) -> pd.DataFrame:
    """Re-measure by exact patching the ``k`` slots with the largest ``|delta|`` in an attribution frame.

    Returns:
        The top rows with ``attribution`` and ``patched`` (normalised recoveries) and ``attribution_delta``
        and ``patched_delta`` (raw changes of the metric), sorted by ``|attribution_delta|``.
    """
    check_signature(metric)
    if k < 1:
        raise ValueError(f"k={k}; it must be at least 1")
    check_same_shape(clean_tokens, corrupt_tokens)
    top = attribution.reindex(attribution["delta"].abs().sort_values(ascending=False).index).head(k)
    slots = [
        Slot(
            row.hook,
            None if "position" not in top or pd.isna(row.position) else int(row.position),
            None if "head" not in top or pd.isna(row.head) else int(row.head),
        )
        for row in top.itertuples()
    ]
    clean_run, corrupt_run = run_batches(clean_tokens, corrupt_tokens, attention_mask, labels)
    clean, corrupt, values = _patch_in_batch(model, clean_run, corrupt_run, slots, metric, batch_size)
    out = top.rename(columns={"delta": "attribution_delta", "value": "attribution"}).reset_index(drop=True)
    out["patched_delta"] = [v - corrupt for v in values]
    out["patched"] = normalised_effect(out["patched_delta"], clean, corrupt, what="the patched recovery")
    return out


def _patch_in_batch(
    model: nn.Module,
    clean_run: Batch,
    corrupt_run: Batch,
    slots: Sequence[Slot],
    metric: Metric,
    batch_size: int | None,
) -> tuple[float, float, list[float]]:
    """Clean metric, corrupt metric and each slot's patched metric, from as few forward passes as fit.

    Each pass stacks ``[clean, corrupt, corrupt, ...]`` along the batch; at a patched hook a copy takes the
    slot's value from the clean rows of the same pass, which no patch touches, so it is the clean run's.
    """
    if batch_size is None:
        batch_size = max(1, TOKEN_BUDGET // clean_run.tokens.numel() - 2)
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}; it must be at least 1 (patches per forward pass)")
    clean = corrupt = float("nan")
    values: list[float] = []
    for start in range(0, len(slots), batch_size):
        chunk = slots[start : start + batch_size]
        n = 2 + len(chunk)  # copies: clean, corrupt, then one per patch
        by_hook: dict[str, list[tuple[int, Slot]]] = {}
        for i, slot in enumerate(chunk):
            by_hook.setdefault(slot.hook, []).append((2 + i, slot))

        def from_clean(copies: torch.Tensor, hook, n=n, by_hook=by_hook) -> torch.Tensor:
            # copies: [copy, batch, ...]
            mask = torch.zeros((n, *copies.shape[2:]), dtype=torch.bool)  # [copy, ...] (same for every row)
            for i, slot in by_hook[hook.name]:
                mask[i] = slot_mask(hook.name, copies.shape[1:], slot.position, slot.head)[0]
            mask = mask[:, None].to(copies.device)  # [copy, 1, ...]
            return torch.where(mask, copies[:1], copies)

        hooks = [(name, from_clean) for name in by_hook]
        tokens = [clean_run.tokens] + [corrupt_run.tokens] * (n - 1)
        parts = run_conditions(model, tokens, hooks, attention_mask=clean_run.attention_mask)
        clean = float(mean_metric(metric, parts[0], clean_run, "on the clean run"))
        corrupt = float(mean_metric(metric, parts[1], corrupt_run, "on the corrupt run"))
        values += [
            float(mean_metric(metric, part, corrupt_run, f"for the patch {chunk[i]}"))
            for i, part in enumerate(parts[2:])
        ]
    return clean, corrupt, values
