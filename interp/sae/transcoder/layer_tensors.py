"""The per-layer tensors a transcoder is built from: which layers they cover, and each stacked into one
parameter ``[n_layers_with_features, ...]`` after its shape is checked, with one error line per misfit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

Tensors = torch.Tensor | Mapping[int, torch.Tensor]


def layers_of(value: Tensors, layers: Sequence[int] | None) -> list[int]:
    """The model layers a stacked tensor (rows in ``layers``, default ``0..n-1``) or a dict covers."""
    if isinstance(value, Mapping):
        keys = sorted(value)
        if layers is not None and list(layers) != keys:
            raise ValueError(f"layers={list(layers)} but the tensors are given for layers {keys}")
        return keys
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"expected a tensor or a dict layer -> tensor, got {type(value).__name__}")
    if layers is None:
        return list(range(value.shape[0]))
    out = [int(x) for x in layers]
    if sorted(set(out)) != out or any(x < 0 for x in out):
        raise ValueError(f"layers={list(layers)}; they must be distinct, ascending and >= 0")
    return out


def layer_parameter(
    name: str, value: Tensors | None, layers: list[int], shape: tuple[int, ...]
) -> nn.Parameter | None:
    """``value`` as one parameter ``[len(layers), *shape]``, or a ValueError naming the tensor and shapes."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if sorted(value) != layers:
            raise ValueError(f"{name} is given for layers {sorted(value)}; expected layers {layers}")
        value = torch.stack([torch.as_tensor(value[layer]) for layer in layers])
    want = (len(layers), *shape)
    if tuple(value.shape) != want:
        raise ValueError(
            f"{name} has shape {tuple(value.shape)}; expected {list(want)} (layers, {_dims(name)})"
        )
    return nn.Parameter(value.detach().clone())


def _dims(name: str) -> str:
    return {
        "W_enc": "d_transcoder, d_model",
        "W_dec": "d_transcoder, d_model",
        "b_enc": "d_transcoder",
        "b_dec": "d_model",
        "threshold": "d_transcoder",
        "W_skip": "d_model out, d_model in",
    }.get(name, "...")
