"""Devices and dtypes as a user names them (``"cuda:1"``, ``"bfloat16"``), checked against this machine.

Its own module so that both the loader and the placement checks, which run before any loading, can use it.
"""

from __future__ import annotations

import os

import torch


def parse_device(device: str | torch.device | None) -> torch.device | None:
    """``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"cpu"`` or a ``torch.device``, checked against this machine.

    Raises:
        ValueError: not a device, or one this torch cannot use here (a CPU-only build asked for ``"cuda"``,
            no GPU visible, an index past the last GPU); the message names the devices that are available.
    """
    if device is None:
        return None
    if isinstance(device, torch.device):
        parsed = device
    else:
        try:
            parsed = torch.device(device)
        except (RuntimeError, TypeError) as err:
            raise ValueError(
                f"device={device!r} is not a device; write one as 'cpu', 'cuda', 'cuda:1' or 'mps' "
                f"(available here: {', '.join(available_devices())})"
            ) from err
    problem = _unusable(parsed)
    if problem:
        raise ValueError(
            f"device={str(device)!r} cannot be used: {problem}; "
            f"available here: {', '.join(available_devices())}"
        )
    return parsed


def available_devices() -> list[str]:
    """The devices this torch can compute on here: ``cpu``, each CUDA GPU, ``mps``, each XPU."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        found.append("mps")
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        found += [f"xpu:{i}" for i in range(torch.xpu.device_count())]
    return found


def _unusable(device: torch.device) -> str | None:
    """Why ``device`` cannot hold tensors in this process, or ``None`` when it can."""
    kind = device.type
    if kind in ("cpu", "meta"):
        return None
    if kind == "cuda":
        if torch.version.cuda is None and torch.version.hip is None:
            return f"this torch ({torch.__version__}) is built without CUDA; install a CUDA build of torch"
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            shown = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
            return f"no CUDA GPU is visible to this process{shown}"
        if device.index is not None and device.index >= count:
            return f"there is no GPU {device.index}: this machine has {count} (cuda:0 to cuda:{count - 1})"
        return None
    if kind == "mps":
        if not torch.backends.mps.is_built():
            return f"this torch ({torch.__version__}) is built without MPS"
        return None if torch.backends.mps.is_available() else "MPS is not available on this machine"
    backend = getattr(torch, kind, None)
    if backend is not None and hasattr(backend, "is_available"):
        if not backend.is_available():
            return f"no {kind} device is available to this torch ({torch.__version__})"
        count = backend.device_count() if hasattr(backend, "device_count") else None
        if count is not None and device.index is not None and device.index >= count:
            return f"there is no {kind} device {device.index}: this machine has {count}"
        return None
    return f"this torch ({torch.__version__}) has no {kind!r} backend loaded"


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
