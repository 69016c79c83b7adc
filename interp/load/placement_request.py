"""A placement request checked before the model exists: the devices named, the budgets, the offload folder.

These checks need no weights, so :func:`interp.load` runs them before it opens the checkpoint, and the
command line runs them before anything loads (:func:`interp.preflight.check_placement`). Devices are
returned as ``accelerate`` names them in its maps: a GPU by its index, ``"cpu"``, ``"disk"``, ``"mps"``.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DeviceMap = str | dict[str, Any]


@dataclass(frozen=True)
class Request:
    """A checked placement request: the map (``"auto"`` or module -> accelerate device), budgets, folder."""

    device_map: str | dict[str, int | str]
    max_memory: dict[int | str, int] | None
    offload_folder: Path | None


def check_request(
    device_map: DeviceMap, max_memory: dict | None, offload_folder: str | os.PathLike | None
) -> Request:
    """Check what can be checked without the model: the devices named, the budgets, the offload folder.

    Raises:
        ValueError: a device this torch does not have, a budget that is not a size, an unwritable folder.
        ImportError: ``accelerate`` is not installed.
    """
    try:
        import accelerate  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "device_map needs the accelerate package: pip install 'interp[devices]' (or pip install accelerate)"
        ) from err
    if isinstance(device_map, str):
        if device_map != "auto":
            raise ValueError(
                f"device_map={device_map!r}; pass 'auto' or a dict of module -> device, such as "
                "{'embed': 'cpu', 'blocks.0': 'cpu', 'blocks.1': 'disk', 'ln_final': 'cpu', 'unembed': 'cpu'}"
            )
        mapped: str | dict[str, int | str] = "auto"
    elif isinstance(device_map, dict):
        mapped = {
            str(name): accelerate_device(device, f"device_map[{name!r}]")
            for name, device in device_map.items()
        }
    else:
        raise TypeError(
            f"device_map must be 'auto' or a dict of module -> device, not {type(device_map).__name__}"
        )
    budgets = None if max_memory is None else _budgets(max_memory)
    folder = None if offload_folder is None else _writable(Path(offload_folder).expanduser())
    return Request(mapped, budgets, folder)


def accelerate_device(device: Any, what: str) -> int | str:
    """A device as ``accelerate`` names it in maps: a GPU's index, ``"cpu"``, ``"disk"``, ``"mps"``...

    Raises:
        ValueError: naming ``what``, when this torch cannot use the device here.
    """
    from interp.load.devices import parse_device

    if device == "disk":
        return "disk"
    if isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    try:
        parsed = parse_device(device)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{what}: {err}") from None
    if parsed is None or parsed.type == "meta":
        raise ValueError(
            f"{what}={device!r} is not a device to place weights on; use 'cpu', 'cuda:N' or 'disk'"
        )
    if parsed.type == "cuda":
        return parsed.index or 0
    return str(parsed)


def _budgets(max_memory: dict) -> dict[int | str, int]:
    from accelerate.utils import convert_file_size_to_int

    if not isinstance(max_memory, dict):
        raise TypeError("max_memory must be a dict of device -> size, such as {0: '20GiB', 'cpu': '60GiB'}")
    out: dict[int | str, int] = {}
    for device, size in max_memory.items():
        key = accelerate_device(device, f"max_memory[{device!r}]")
        try:
            out[key] = convert_file_size_to_int(size)
        except (ValueError, TypeError):
            raise ValueError(
                f"max_memory[{device!r}]={size!r} is not a size; write bytes as an int or a string such as '2GiB'"
            ) from None
    return out


def _writable(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(
            f"offload_folder={str(folder)!r} is not a writable folder ({err.strerror or err}); pass a folder "
            "you can write, on a disk with room for the offloaded weights"
        ) from None
    return folder
