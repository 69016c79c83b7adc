"""Patching and ablation of routing: force an expert in, take one out, or give a prompt its twin's routing.

Each edit acts on one mixture-of-experts layer, at every position or at chosen ones, through the layer's routing
hooks (:mod:`interp.model.moe`), so the rest of the model computes itself:

- :meth:`RoutingEdit.force` puts expert ``e`` among the chosen in place of the lightest chosen expert (where it
  is not chosen already). Its weight, like the others', is then read from the router's own softmax at the new
  choice, renormalised over the chosen where the family renormalises: the router's opinion of ``e`` decides
  how much it counts.
- :meth:`RoutingEdit.remove` sets the router's logit of ``e`` to ``-inf``: the router behaves as if ``e`` did
  not exist. The top ``k`` are chosen among the other experts and weighted by the family's rule: a softmax over
  the chosen (Mixtral, Qwen3-MoE, OLMoE, Qwen2-MoE with ``norm_topk_prob``), or, where the family does not
  renormalise (Qwen2-MoE), the softmax over the remaining experts, which is each one's probability divided by
  ``1 - p(e)``.
- :meth:`RoutingEdit.twin` takes the chosen experts of a twin prompt (the same length), and with
  ``weights=True`` their weights too; without, the weights are this prompt's router's at the twin's choice.

:func:`routing_effects` measures any list of edits with the one metric type (:mod:`interp.analysis.metric`),
each edit in its own copy of the batch, many copies per forward pass (:mod:`interp.analysis.conditions`).
:func:`routing_patch` sweeps the twin's routing over layers (and positions), as :func:`~interp.analysis.patch`
sweeps activations, and reports the normalised recovery. Every edit is checked against the unedited routing
before an edited forward runs: an expert out of range, a dense layer, an edit that would change nothing (an
expert removed from tokens that never chose it, forced into tokens that all chose it) are refused in one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import torch
from torch import nn

from interp.analysis.checks import check_indices, check_same_shape
from interp.analysis.conditions import run_conditions
from interp.analysis.effect import normalised_effect
from interp.analysis.metric import Batch, Metric, check_signature, mean_metric
from interp.analysis.routing import check_expert, check_moe_layer, moe_layers

Kind = Literal["force", "remove", "twin"]
TOKEN_BUDGET = 8192  # tokens per edited forward when batch_size is not given


@dataclass(frozen=True)
class RoutingEdit:
    """One edit of one layer's routing (see the module docstring); build it with :meth:`force`,
    :meth:`remove` or :meth:`twin`. ``positions`` ``None`` means every position."""

    kind: Kind
    layer: int
    expert: int | None = None
    positions: tuple[int, ...] | None = None
    weights: bool = False

    @classmethod
    def force(cls, layer: int, expert: int, positions: int | Sequence[int] | None = None) -> RoutingEdit:
        return cls("force", layer, expert, _positions(positions))

    @classmethod
    def remove(cls, layer: int, expert: int, positions: int | Sequence[int] | None = None) -> RoutingEdit:
        return cls("remove", layer, expert, _positions(positions))

    @classmethod
    def twin(
        cls, layer: int, positions: int | Sequence[int] | None = None, *, weights: bool = False
    ) -> RoutingEdit:
        return cls("twin", layer, None, _positions(positions), weights)

    def __str__(self) -> str:
        where = "" if self.positions is None else "@" + ",".join(map(str, self.positions))
        what = f"L{self.layer}" + ("" if self.expert is None else f".E{self.expert}")
        return f"{self.kind} {what}{where}" + (" with weights" if self.weights else "")


def _positions(positions: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if positions is None:
        return None
    return (positions,) if isinstance(positions, int) else tuple(positions)


def _mask(edit: RoutingEdit, n_pos: int) -> torch.Tensor:
    """``[pos]`` True where ``edit`` applies."""
    mask = torch.zeros(n_pos, dtype=torch.bool)
    mask[check_indices(edit.positions, n_pos, "position", f"a sequence of {n_pos} tokens")] = True
    return mask


def _check_edits(
    model: nn.Module, edits: Sequence[RoutingEdit], chosen: dict[int, torch.Tensor], real: torch.Tensor
) -> None:
    """Refuse, in one line each, edits that cannot run or would change nothing (``chosen``: the unedited
    ``hook_expert_indices`` by layer; ``real``: the tokens that are not padding)."""
    k, n = model.cfg.experts_per_token, model.cfg.n_experts
    for edit in edits:
        if not isinstance(edit, RoutingEdit):
            raise TypeError(f"an edit is a RoutingEdit (force, remove or twin), got {edit!r}")
        layer = check_moe_layer(model, edit.layer)
        where = _mask(edit, real.shape[1])[None, :, None] & real[:, :, None]  # [batch, pos, 1]
        if edit.kind == "twin":
            continue
        expert = check_expert(model, edit.expert, layer)
        routed = ((chosen[layer] == expert) & where).any(-1)  # [batch, pos]
        if edit.kind == "remove":
            if not bool(routed.any()):
                raise ValueError(
                    f"{edit}: no token at the positions edited chose expert {expert} of layer {layer}, so "
                    "removing it changes nothing; choose an expert those tokens use"
                )
            if n - 1 < k:
                raise ValueError(
                    f"{edit}: layer {layer} routes each token to k={k} of its {n} experts, so no expert can be "
                    "left out of a choice"
                )
        elif bool(routed[where[..., 0]].all()):
            raise ValueError(
                f"{edit}: every token at the positions edited already chose expert {expert} of layer {layer}, "
                "so forcing it changes nothing"
            )


def _copy_hooks(model: nn.Module, chunk: Sequence[RoutingEdit], twin: Mapping[str, torch.Tensor] | None):
    """``(name, CopyHook)`` pairs: copy ``i`` of the stacked batch gets ``chunk[i]``."""
    k = model.cfg.experts_per_token
    by_hook: dict[str, list[tuple[int, RoutingEdit]]] = {}
    for i, edit in enumerate(chunk):
        mlp = f"blocks.{edit.layer % model.cfg.n_layers}.mlp"
        hook = "hook_router_logits" if edit.kind == "remove" else "hook_expert_indices"
        by_hook.setdefault(f"{mlp}.{hook}", []).append((i, edit))
        if edit.kind == "twin" and edit.weights:
            by_hook.setdefault(f"{mlp}.hook_expert_weights", []).append((i, edit))

    def edit_copies(edits: list[tuple[int, RoutingEdit]]):
        def apply(act: torch.Tensor, hook) -> torch.Tensor:
            act = act.clone()  # [copy, batch, pos, n_experts or k]
            for i, edit in edits:
                where = _mask(edit, act.shape[2]).to(act.device)  # [pos]
                x = act[i]  # [batch, pos, ...]
                if edit.kind == "remove":
                    x[:, where, edit.expert] = float("-inf")
                elif edit.kind == "force":
                    absent = (x != edit.expert).all(-1) & where  # [batch, pos]
                    x[..., k - 1][absent] = edit.expert
                else:
                    source = twin[hook.name].to(act.device, act.dtype)  # [batch, pos, k]
                    x[:, where] = source[:, where]
            return act

        return apply

    return [(name, edit_copies(edits)) for name, edits in by_hook.items()]


def _routing_names(layers: Sequence[int], weights: bool) -> list[str]:
    names = [f"blocks.{l}.mlp.hook_expert_indices" for l in layers]
    return names + ([f"blocks.{l}.mlp.hook_expert_weights" for l in layers] if weights else [])


@torch.no_grad()
def routing_effects(
    model: nn.Module,
    tokens: torch.Tensor,
    edits: Sequence[RoutingEdit],
    metric: Metric,
    *,
    twin_tokens: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    labels: Mapping[str, torch.Tensor] | None = None,
    batch_size: int | None = None,
) -> pd.DataFrame:
    """``metric`` on ``tokens`` under each routing edit, each edit in its own copy of the batch.

    Args:
        model: a model with mixture-of-experts layers.
        tokens: ``[batch, pos]``; every edit applies to every row.
        edits: :class:`RoutingEdit` s.
        metric: ``metric(logits, batch) -> [batch]``, averaged over the rows.
        twin_tokens: ``[batch, pos]`` the twin prompts whose routing ``twin`` edits take (run with the same
            ``attention_mask``); needed by those edits.
        attention_mask: ``[batch, pos]``, shared with the twins (an edit at padding reaches no real token).
        labels: per-row tensors the metric reads (``answer``, ``foil``...).
        batch_size: edits per forward pass (default: as many as fit in about 8k tokens).

    Returns:
        One row per edit: ``edit`` (its text), ``kind, layer, expert, metric`` (the edited run's mean) and
        ``delta`` (minus the unedited metric); with ``twin_tokens`` also ``value``, the normalised effect
        ``delta / (twin - unedited)``. ``frame.attrs`` holds ``metric`` (unedited) and ``twin_metric``.

    Raises:
        ValueError, IndexError, TypeError: an edit that cannot run or would change nothing, a twin edit
            without twin tokens, twin tokens of another shape, a metric of the wrong form; all before an
            edited forward pass.
    """
    check_signature(metric)
    edits = list(edits)
    if not edits:
        raise ValueError("no edits: give RoutingEdit.force, .remove or .twin edits to measure")
    run = Batch(tokens, attention_mask, labels=labels or {})
    layers = sorted({check_moe_layer(model, e.layer) for e in edits if isinstance(e, RoutingEdit)})
    if any(e.kind == "twin" for e in edits) and twin_tokens is None:
        raise ValueError("twin edits take the routing of twin_tokens; pass twin_tokens=[batch, pos] ids")
    logits, cache = model.run_with_cache(
        run.tokens, run.attention_mask, names_filter=_routing_names(layers, False)
    )
    real = (
        torch.ones(run.tokens.shape, dtype=torch.bool)
        if run.attention_mask is None
        else run.attention_mask.cpu().bool()
    )
    chosen = {l: cache[f"blocks.{l}.mlp.hook_expert_indices"].cpu() for l in layers}
    _check_edits(model, edits, chosen, real)
    base = float(mean_metric(metric, logits, run, "on the unedited run"))
    twin, twin_metric = None, None
    if twin_tokens is not None:
        twin_run = Batch(twin_tokens, attention_mask, labels=labels or {})
        check_same_shape(twin_run.tokens, run.tokens)
        twin_logits, twin = model.run_with_cache(
            twin_run.tokens, twin_run.attention_mask, names_filter=_routing_names(layers, True)
        )
        twin_metric = float(mean_metric(metric, twin_logits, twin_run, "on the twin run"))
    if batch_size is None:
        batch_size = max(1, TOKEN_BUDGET // run.tokens.numel())
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r}; it must be a positive integer (edits per forward pass)")
    values = []
    for start in range(0, len(edits), batch_size):
        chunk = edits[start : start + batch_size]
        hooks = _copy_hooks(model, chunk, twin)
        parts = run_conditions(model, run.tokens, hooks, copies=len(chunk), attention_mask=run.attention_mask)
        values += [
            float(mean_metric(metric, part, run, f"with the edit {chunk[i]}")) for i, part in enumerate(parts)
        ]
    frame = pd.DataFrame(
        {
            "edit": [str(e) for e in edits],
            "kind": [e.kind for e in edits],
            "layer": [e.layer % model.cfg.n_layers for e in edits],
            "expert": pd.array([e.expert for e in edits], dtype="Int64"),
            "metric": values,
            "delta": [v - base for v in values],
        }
    )
    if twin_metric is not None:
        frame["value"] = normalised_effect(frame["delta"], twin_metric, base, what="the routing's effect")
    frame.attrs.update(metric=base, twin_metric=twin_metric)
    return frame


def routing_patch(
    model: nn.Module,
    clean_tokens: torch.Tensor,
    corrupt_tokens: torch.Tensor,
    metric: Metric,
    by: Literal["layer", "position"] = "layer",
    *,
    layers: Sequence[int] | None = None,
    weights: bool = False,
    attention_mask: torch.Tensor | None = None,
    labels: Mapping[str, torch.Tensor] | None = None,
    batch_size: int | None = None,
) -> pd.DataFrame:
    """The clean run's routing patched into the corrupted run, one layer (or one layer at one position) at a
    time: how much of the clean behaviour the routing alone brings back.

    Args:
        clean_tokens, corrupt_tokens: ``[batch, pos]`` twins of one shape.
        metric: ``metric(logits, batch) -> [batch]``, averaged over the rows.
        by: ``"layer"`` (every position of a layer at once) or ``"position"``.
        layers: the mixture-of-experts layers to patch (default: all).
        weights: also take the clean run's weights (default: the corrupted router's, at the clean choice).
        attention_mask, labels, batch_size: as for :func:`routing_effects`.

    Returns:
        ``layer, [position], delta, value``: ``delta`` is the patched minus the corrupted metric, ``value`` the
        normalised recovery ``delta / (clean - corrupt)``; ``frame.attrs`` holds ``clean_metric`` and
        ``corrupt_metric``.
    """
    if by not in ("layer", "position"):
        raise ValueError(f"by={by!r}; expected 'layer' or 'position'")
    chosen = moe_layers(model) if layers is None else [check_moe_layer(model, l) for l in layers]
    check_same_shape(clean_tokens, corrupt_tokens)
    n_pos = Batch(corrupt_tokens).n_pos
    spots = [None] if by == "layer" else list(range(n_pos))
    edits = [RoutingEdit.twin(l, p, weights=weights) for l in chosen for p in spots]
    frame = routing_effects(
        model,
        corrupt_tokens,
        edits,
        metric,
        twin_tokens=clean_tokens,
        attention_mask=attention_mask,
        labels=labels,
        batch_size=batch_size,
    )
    out = pd.DataFrame({"layer": frame["layer"]})
    if by == "position":
        out["position"] = [e.positions[0] for e in edits]
    out["delta"], out["value"] = frame["delta"], frame["value"]
    out.attrs.update(clean_metric=frame.attrs["twin_metric"], corrupt_metric=frame.attrs["metric"])
    return out
