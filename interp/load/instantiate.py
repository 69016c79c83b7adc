"""``load``: a checkpoint as a ready :class:`~interp.HookedTransformer`, tokenizer attached."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from interp.load.checkpoint import load_checkpoint

if TYPE_CHECKING:
    from interp.model import HookedTransformer


def load(
    name_or_path: str | os.PathLike,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> HookedTransformer:
    """Load a trained model: a packaged name, a Hugging Face model folder, or a ``.gguf`` file.

    Args:
        name_or_path: ``"smollm2-135m"``, ``"minilm-l6"``, a folder (``config.json``, ``*.safetensors``,
            ``tokenizer.json``) or a GGUF file. Nothing is ever downloaded.
        device: where to put the model (``"cuda"``, ``"cpu"``, a ``torch.device``); default: CPU.
        dtype: its floating dtype (``"bfloat16"``, ``torch.float16``...); default: float32.

    Returns:
        The model in eval mode, with ``model.tokenizer`` set.

    Example:
        >>> model = load("smollm2-135m")  # doctest: +SKIP
        >>> ids, mask = model.tokenizer.to_tokens("The animal didn't cross the street")  # doctest: +SKIP
    """
    from interp.model import (
        HookedTransformer,
    )  # the model layer; imported here so load_checkpoint stays hook-free

    torch_device, torch_dtype = parse_device(device), parse_dtype(dtype)
    cfg, state, tokenizer = load_checkpoint(name_or_path)
    model = HookedTransformer(cfg, init_weights=False)
    model.load_state_dict(state, strict=True)
    model.tokenizer = tokenizer
    model.to(device=torch_device, dtype=torch_dtype)
    return model.eval()


def parse_device(device: str | torch.device | None) -> torch.device | None:
    """``"cuda"``, ``"cuda:1"``, ``"cpu"`` or a ``torch.device``; raises on anything else."""
    if device is None or isinstance(device, torch.device):
        return device
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a device; use e.g. 'cpu', 'cuda' or 'cuda:0'") from err


def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """``"float32"``, ``"bfloat16"``, ``"float16"`` (or ``"torch.bfloat16"``...) or a floating torch dtype."""
    if dtype is None:
        return None
    value = getattr(torch, dtype.removeprefix("torch."), None) if isinstance(dtype, str) else dtype
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(
            f"dtype={dtype!r} is not a floating torch dtype; use e.g. 'float32', 'bfloat16', 'float16'"
        )
    return value
