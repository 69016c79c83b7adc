"""``load``: a checkpoint as a ready :class:`~interp.HookedTransformer`, tokenizer attached."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from interp.load import placement
from interp.load.assign import assign_state
from interp.load.checkpoint import load_checkpoint
from interp.load.devices import available_devices, parse_device, parse_dtype  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from interp.model import HookedTransformer


def load(
    name_or_path: str | os.PathLike,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    device_map: str | dict | None = None,
    max_memory: dict | None = None,
    offload_folder: str | os.PathLike | None = None,
) -> HookedTransformer:
    """Load a trained model: a packaged name, a Hugging Face model folder, or a ``.gguf`` file.

    Args:
        name_or_path: ``"smollm2-135m"``, ``"minilm-l6"``, a folder (``config.json``, ``*.safetensors``,
            ``tokenizer.json``) or a GGUF file. Nothing is ever downloaded.
        device: where to put the model (``"cuda"``, ``"cpu"``, a ``torch.device``); default: CPU.
        dtype: its floating dtype (``"bfloat16"``, ``torch.float16``...); default: float32.
        device_map: place the model over several devices with ``accelerate`` instead of on ``device``:
            ``"auto"`` (blocks fill the GPUs, then the CPU, then disk) or a dict of module -> device
            (``{"embed": 0, "blocks.0": 0, "blocks.1": "cpu", "blocks.2": "disk", ...}``); see docs/devices.md.
        max_memory: with ``device_map="auto"``, the most each device may hold (``{0: "20GiB", "cpu": "60GiB"}``).
        offload_folder: where weights placed on ``"disk"`` are written.

    Returns:
        The model in eval mode, with ``model.tokenizer`` set.

    Example:
        >>> model = load("smollm2-135m")  # doctest: +SKIP
        >>> ids, mask = model.tokenizer.to_tokens("The animal didn't cross the street")  # doctest: +SKIP
    """
    torch_device, torch_dtype = parse_device(device), parse_dtype(dtype)
    if device_map is None:
        if max_memory is not None or offload_folder is not None:
            raise ValueError("max_memory and offload_folder go with device_map=...; pass device_map='auto'")
        model = _load_on(name_or_path, torch_device, torch_dtype)
    else:
        if device is not None:
            raise ValueError(
                f"pass device={str(device)!r} or device_map=..., not both: a device map places the model"
            )
        request = placement.check_request(device_map, max_memory, offload_folder)  # before the checkpoint
        model = _load_dispatched(name_or_path, request, torch_dtype or torch.float32)
    return model.eval()


def _load_on(
    name_or_path: str | os.PathLike, device: torch.device | None, dtype: torch.dtype | None
) -> HookedTransformer:
    """The model on one device, its parameters the checkpoint's own tensors where no conversion is needed."""
    from interp.model import HookedTransformer  # the model layer; imported here so the loader stays hook-free

    cfg, state, tokenizer = load_checkpoint(name_or_path, dtype=None)  # each tensor converted once, below
    model = HookedTransformer(cfg, init_weights=False)  # its parameters are allocated, never written
    weights = dtype or torch.float32
    assign_state(model, state, dtype=weights, place=lambda name: device, source=str(name_or_path))
    model.to(device=device, dtype=dtype)  # the buffers no checkpoint holds
    model.tokenizer = tokenizer
    return model


def _load_dispatched(
    name_or_path: str | os.PathLike, request: placement.Request, dtype: torch.dtype
) -> HookedTransformer:
    """The model built on the meta device, its tensors placed by the device map, accelerate's hooks attached."""
    from accelerate import init_empty_weights  # check_request has made sure it is installed

    from interp.model import HookedTransformer

    cfg, state, tokenizer = load_checkpoint(name_or_path, dtype=None)  # converted as each tensor is placed
    with init_empty_weights(include_buffers=False):
        model = HookedTransformer(cfg, init_weights=False)
    device_map = placement.plan(model, request, dtype)
    model = placement.dispatch(model, state, device_map, dtype, request.offload_folder)
    model.tokenizer = tokenizer
    return model
