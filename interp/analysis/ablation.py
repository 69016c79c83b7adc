"""Ablations: replace some slots of an activation by zero, by a dataset mean, or by another input's value.

Zero ablation asks "what if this component wrote nothing?", which can push the model off its usual
distribution; mean ablation replaces the slot by its average over a reference dataset, keeping the
input-independent part; resample ablation takes the value from a different input (Chan et al. 2022, causal
scrubbing), keeping the activation on-distribution while removing what is specific to this input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.patching import hook_names_for
from interp.analysis.slots import slot_axes, slot_mask

How = Literal["zero", "mean", "resample"]


def _reference_cache(
    model: nn.Module,
    reference: torch.Tensor | ActivationCache | None,
    names: list[str],
    how: str,
    reference_mask: torch.Tensor | None,
) -> ActivationCache:
    if reference is None:
        raise ValueError(f"how={how!r} needs reference= (tokens [batch, pos] or a cache holding {names})")
    if isinstance(reference, ActivationCache):
        missing = [n for n in names if n not in reference]
        if missing:
            raise ValueError(f"the reference cache lacks {missing}; cache them with names_filter={names}")
        return reference
    with torch.no_grad():
        return model.run_with_cache(reference, reference_mask, names_filter=names)[1]


def _mean(name: str, act: torch.Tensor, mask: torch.Tensor | None, per_position: bool) -> torch.Tensor:
    """Mean over the batch (and positions unless ``per_position``), counting real tokens under ``mask``."""
    pos_axis, _ = slot_axes(name)
    weight = torch.ones(act.shape[0], act.shape[pos_axis], device=act.device)
    if mask is not None:
        weight = mask.reshape(weight.shape).to(act.device, torch.float32)
    shape = [1] * act.ndim
    shape[0], shape[pos_axis] = weight.shape
    weight = weight.reshape(shape)  # [batch, 1.., pos, 1..]
    dims = [0] if per_position else [0, pos_axis]
    total = (act.float() * weight).sum(dims, keepdim=True)
    return (total / weight.sum(dims, keepdim=True).clamp(min=1)).to(act.dtype)


def ablation_hooks(
    model: nn.Module,
    hook_name: str | Sequence[str],
    how: How = "zero",
    *,
    heads: int | Sequence[int] | None = None,
    positions: int | Sequence[int] | None = None,
    reference: torch.Tensor | ActivationCache | None = None,
    reference_mask: torch.Tensor | None = None,
    per_position: bool = True,
) -> list[tuple[str, object]]:
    """Forward hooks that ablate, for ``model.run_with_hooks(..., fwd_hooks=...)`` or ``model.hooks(...)``.

    Args:
        hook_name: a name, glob, list or ``{layer}`` template.
        how: ``"zero"``, ``"mean"`` (over ``reference``) or ``"resample"`` (from ``reference``).
        heads, positions: the slots to ablate (default all); heads need a per-head hook.
        reference: tokens ``[batch, pos]`` or a cache. For ``"mean"`` a dataset; for ``"resample"`` inputs of
            the same shape as the ablated run (or batch 1, used for every row).
        reference_mask: attention mask of the reference tokens; padding is left out of means.
        per_position: ``"mean"`` only: average per position (the reference must have the run's length) or
            over positions too.
    """
    if how not in ("zero", "mean", "resample"):
        raise ValueError(f"how={how!r}; expected 'zero', 'mean' or 'resample'")
    names = hook_names_for(model, hook_name)
    replacement: dict[str, torch.Tensor] = {}
    if how != "zero":
        cache = _reference_cache(model, reference, names, how, reference_mask)
        for name in names:
            act = cache[name]
            replacement[name] = _mean(name, act, reference_mask, per_position) if how == "mean" else act

    def ablate_slots(act: torch.Tensor, hook) -> torch.Tensor:
        value = replacement.get(hook.name, torch.zeros((), dtype=act.dtype))
        value = value.to(act.device, act.dtype)
        try:
            value = value.expand_as(act)
        except RuntimeError:
            raise ValueError(
                f"the {how} replacement for {hook.name!r} has shape {tuple(value.shape)}, which does not "
                f"fit the activation's {tuple(act.shape)}; "
                + (
                    "use reference inputs of the same [batch, pos]"
                    if how == "resample"
                    else "use a reference of the same length or per_position=False"
                )
            ) from None
        mask = slot_mask(hook.name, act.shape, positions, heads).to(act.device)
        return torch.where(mask, value, act)

    return [(name, ablate_slots) for name in names]


@torch.no_grad()
def ablate(
    model: nn.Module,
    tokens: torch.Tensor,
    hook_name: str | Sequence[str],
    how: How = "zero",
    *,
    heads: int | Sequence[int] | None = None,
    positions: int | Sequence[int] | None = None,
    reference: torch.Tensor | ActivationCache | None = None,
    attention_mask: torch.Tensor | None = None,
    reference_mask: torch.Tensor | None = None,
    per_position: bool = True,
) -> torch.Tensor:
    """Logits of ``tokens`` with the chosen slots of ``hook_name`` ablated (see :func:`ablation_hooks`).

    >>> from interp import HookedTransformer, TransformerConfig
    >>> cfg = TransformerConfig(n_layers=1, d_model=8, n_heads=2, d_vocab=10, n_ctx=4, seed=0)
    >>> model = HookedTransformer(cfg)
    >>> ablate(model, torch.tensor([[1, 2, 3]]), "blocks.0.attn.hook_z", heads=[0]).shape
    torch.Size([1, 3, 10])
    """
    hooks = ablation_hooks(
        model,
        hook_name,
        how,
        heads=heads,
        positions=positions,
        reference=reference,
        reference_mask=reference_mask,
        per_position=per_position,
    )
    return model.run_with_hooks(tokens, attention_mask, fwd_hooks=hooks)
