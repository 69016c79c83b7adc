"""A metric of the next token against steering scale, for many vectors and scales in few forward passes.

Each forward pass stacks several conditions (a vector and a scale) along the batch: the prompts are repeated
once per condition and one hook per steered hook name adds each row's own ``scale * vector``. Conditions at
different layers share a pass, because a row's addition is zero at every hook but its own.

Steering only each prompt's last token (``positions="last"``) leaves everything before it as it was, so the
prompt minus its last token is run once, unsteered, into a KV cache, and every condition then runs a single
token against a copy of that cache: a sweep of many layers and scales costs little more than one token per
condition and prompt.

The metric is the one of :mod:`interp.analysis.metric`, ``metric(logits, batch) -> [rows]``: ``logits`` are
``[rows, d_vocab]`` at each row's last token, and ``batch`` holds the rows that ran (each prompt once per
condition) with the label ``prompt`` (each row's prompt index) and the caller's per-prompt ``labels``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from interp.analysis.conditions import Conditions
from interp.analysis.metric import Batch, Metric, check_metric, check_signature
from interp.analysis.steering import SteeringVector
from interp.model.kv_cache import KVCache


@torch.no_grad()
def steering_sweep(
    model: Any,
    prompts: Sequence[str],
    vectors: SteeringVector | Mapping[str, SteeringVector],
    scales: Sequence[float],
    metric: Metric,
    *,
    positions: str | Sequence[int] = "all",
    baseline: bool = True,
    labels: Mapping[str, torch.Tensor] | None = None,
    batch_size: int = 64,
    prepend_bos: bool | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """The next-token metric of each prompt with each vector added at each scale.

    Args:
        model: a :class:`~interp.HookedTransformer` with a tokenizer.
        prompts: the texts; the metric reads the logits at each one's last token.
        vectors: one :class:`~interp.analysis.SteeringVector` or ``{label: vector}``; each is added at its
            own hook.
        scales: multiples of each vector to add.
        metric: ``metric(logits, batch) -> [rows]`` with ``logits [rows, d_vocab]`` at the last token and
            ``batch`` a :class:`~interp.analysis.Batch` of the rows: ``batch.labels["prompt"]`` is each row's
            prompt index, and ``labels`` come repeated per row (so
            :func:`~interp.analysis.logit_difference` works with ``answer`` and ``foil``).
        positions: ``"all"`` (every token of the prompt), ``"last"`` (its last token only, with the rest run
            once and cached), or token indices counted in each prompt (negative from its end).
        baseline: also measure each prompt unsteered (``vector="none"``, ``scale=0``).
        labels: per-prompt tensors ``[n_prompts, ...]`` the metric reads from its batch.
        batch_size: rows (prompt and condition pairs) per forward pass.
        prepend_bos: as in ``model.to_tokens``.
        progress: show a progress bar.

    Returns:
        A DataFrame with columns ``vector``, ``hook``, ``scale``, ``prompt`` and ``value``, one row per
        prompt and condition.
    """
    check_signature(metric)
    if not isinstance(vectors, (SteeringVector, Mapping)):
        raise TypeError(
            f"vectors is a {type(vectors).__name__}; give a SteeringVector or a {{label: SteeringVector}} "
            "mapping (for a list: dict(zip(labels, vectors)))"
        )
    labelled = {"vector": vectors} if isinstance(vectors, SteeringVector) else dict(vectors)
    if not labelled or not all(isinstance(v, SteeringVector) for v in labelled.values()):
        raise TypeError("vectors must be a SteeringVector or a non-empty {label: SteeringVector} mapping")
    for vector in labelled.values():
        vector.check(model)
    prompts = list(prompts)
    if not prompts:
        raise ValueError("steering_sweep needs at least one prompt")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}; give at least 1")
    conditions: list[tuple[str, SteeringVector | None, float]] = [
        (label, vector, float(scale)) for label, vector in labelled.items() for scale in scales
    ]
    if baseline:
        conditions.insert(0, ("none", None, 0.0))
    if not conditions:
        raise ValueError("no conditions: give at least one scale, or baseline=True")
    labels = _check_labels(labels, len(prompts))
    indices = _check_positions(positions)
    chunk = min(len(prompts), batch_size)
    per_pass = max(1, batch_size // chunk)  # conditions stacked in one pass
    records: list[dict] = []
    bar = tqdm(total=len(prompts) * len(conditions), disable=not progress, desc="steering sweep", leave=False)
    for start in range(0, len(prompts), chunk):
        tokens = model.to_tokens(prompts[start : start + chunk], prepend_bos=prepend_bos, padding_side="left")
        ids, mask = tokens.ids, tokens.mask.bool()
        prefix = _prefix_cache(model, ids, mask) if indices == "last" else None
        for first in range(0, len(conditions), per_pass):
            group = conditions[first : first + per_pass]
            logits = _run_group(model, ids, mask, group, indices, prefix)  # [len(group) * n, d_vocab]
            n = ids.shape[0]
            stack = Conditions(copies=len(group), batch=n)
            rows = {k: v[start : start + n] for k, v in labels.items()}
            rows["prompt"] = torch.arange(start, start + n, device=logits.device)
            batch = Batch(
                stack.repeat(ids), stack.repeat(mask), labels={k: stack.repeat(v) for k, v in rows.items()}
            )
            values = check_metric(metric(logits, batch), batch, f"for prompts {start}..{start + n - 1}")
            for row, value in enumerate(values.detach().float().cpu().tolist()):
                label, vector, scale = group[row // n]
                records.append(
                    {
                        "vector": label,
                        "hook": None if vector is None else vector.hook_name,
                        "scale": scale,
                        "prompt": start + row % n,
                        "value": value,
                    }
                )
            bar.update(len(group) * n)
    bar.close()
    return pd.DataFrame.from_records(records, columns=["vector", "hook", "scale", "prompt", "value"])


def _check_labels(labels: Mapping[str, torch.Tensor] | None, n_prompts: int) -> dict[str, torch.Tensor]:
    labels = {} if labels is None else {k: torch.as_tensor(v) for k, v in labels.items()}
    if "prompt" in labels:
        raise ValueError(
            "labels has a 'prompt' entry; that label is the sweep's own (each row's prompt index)"
        )
    for key, value in labels.items():
        if value.ndim == 0 or value.shape[0] != n_prompts:
            raise ValueError(
                f"label {key!r} has shape {list(value.shape)}; give one entry per prompt: [{n_prompts}, ...]"
            )
    return labels


def _check_positions(positions: str | Sequence[int]) -> str | list[int]:
    if positions in ("all", "last"):
        return positions  # type: ignore[return-value]
    items = [positions] if isinstance(positions, int) else list(positions)
    if not items or not all(isinstance(p, int) and not isinstance(p, bool) for p in items):
        raise ValueError(f"positions={positions!r}; give 'all', 'last' or token indices")
    return items


def _prefix_cache(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> KVCache | None:
    """Everything but the last token, run once unsteered into a KV cache (``None`` for one-token prompts)."""
    if ids.shape[1] == 1:
        return None
    cache = KVCache(model.cfg.n_layers, capacity=ids.shape[1])
    model(ids[:, :-1], mask[:, :-1], kv_cache=cache)
    return cache


def _run_group(
    model: Any,
    ids: torch.Tensor,
    mask: torch.Tensor,
    group: list[tuple[str, SteeringVector | None, float]],
    indices: str | list[int],
    prefix: KVCache | None,
) -> torch.Tensor:
    """Logits at the last token ``[len(group) * batch, d_vocab]`` with each condition's rows steered."""
    stack = Conditions(copies=len(group), batch=ids.shape[0])
    hooks = _row_hooks(model, group, stack, mask, indices)
    with model.hooks(hooks):
        if indices == "last":
            rows = stack.repeat(torch.arange(stack.batch, device=ids.device))  # [rows]: each row's prompt
            cache = None if prefix is None else prefix.select(rows)
            logits = model(stack.repeat(ids[:, -1:]), stack.repeat(mask[:, -1:]), kv_cache=cache)
        else:
            logits = model(stack.repeat(ids), stack.repeat(mask))
    return logits[:, -1]  # left padding: the last column is every row's last token


def _row_hooks(
    model: Any,
    group: list[tuple[str, SteeringVector | None, float]],
    stack: Conditions,
    mask: torch.Tensor,
    indices: str | list[int],
) -> list[tuple[str, Callable]]:
    """One hook per steered hook name, adding each condition's own ``scale * vector`` where it should."""
    names = sorted({v.hook_name for _, v, _ in group if v is not None})
    where = None if indices in ("all", "last") else _index_mask(mask, indices)  # [batch, pos]
    hooks = []
    for name in names:
        parts = [
            (v.vector.float() * scale) if v is not None and v.hook_name == name else None
            for _, v, scale in group
        ]
        shape = next(p for p in parts if p is not None).shape
        delta = torch.stack([p if p is not None else torch.zeros(shape) for p in parts])  # [copy, ...]
        hooks.append((name, stack.hook(_adder(delta, where))))
    return hooks


def _adder(delta: torch.Tensor, where: torch.Tensor | None) -> Callable:
    def add(x: torch.Tensor, hook: Any) -> torch.Tensor:
        # x: [copy, batch, pos, ...]
        d = delta.to(x.device, x.dtype)[:, None, None]  # [copy, 1, 1, ...]
        if where is not None:
            d = d * where.to(x.device, x.dtype).view(1, *where.shape, *([1] * (x.ndim - 3)))
        return x + d

    return add


def _index_mask(mask: torch.Tensor, indices: list[int]) -> torch.Tensor:
    """``[rows, pos]``: True at the real tokens whose position in their row is one of ``indices``."""
    positions = mask.long().cumsum(dim=-1) - 1  # [rows, pos]
    lengths = mask.sum(dim=-1, keepdim=True)  # [rows, 1]
    wanted = torch.tensor(indices, device=mask.device)  # [n]
    per_row = torch.where(wanted < 0, lengths + wanted, wanted)  # [rows, n]
    return (positions[:, :, None] == per_row[:, None, :]).any(dim=-1) & mask


__all__ = ["Metric", "steering_sweep"]
