"""Models larger than one device: blocks placed by ``accelerate``'s device maps, weights offloaded to disk.

interp does not schedule devices itself. A device map (module path -> device) comes from the user or from
``accelerate.infer_auto_device_map`` with the transformer block as the unit it never splits, and
``accelerate.dispatch_model`` attaches the hooks that move each block's inputs to the device it runs on, so the
residual stream changes device only where consecutive blocks sit on different devices. The devices follow
``accelerate``'s meaning: a GPU index or ``"cuda:N"`` runs there; ``"cpu"`` runs on the CPU when no block is on a
GPU, and otherwise keeps the weights in CPU memory and runs on the first GPU; ``"disk"`` keeps them in
``offload_folder`` and loads one module at a time.

The token embedding (and, with tied embeddings, the unembedding that reads it) stays on a device that computes,
never offloaded: inputs are moved to it, and the model's ``device`` is its device.

Every request is checked before the checkpoint is read (devices, the offload folder) or before any tensor is
placed (the modules a dict leaves unplaced, a memory budget smaller than one block), with one line saying what
was wrong.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from interp.load.assign import assign_state

DeviceMap = str | dict[str, Any]
_OFFLOADED = ("disk",)


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
    from interp.load.instantiate import parse_device

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


def plan(model: nn.Module, request: Request, dtype: torch.dtype) -> dict[str, int | str]:
    """The device map for ``model`` (built on the meta device), checked against the model.

    Raises:
        ValueError: a dict names a module the model lacks or leaves one unplaced; a budget is smaller than one
            block; disk offload is needed but no ``offload_folder`` was given; the embedding is offloaded.
    """
    from accelerate import infer_auto_device_map

    block = max(_nbytes(b, dtype) for b in model.blocks) if len(model.blocks) else 0
    for device, size in (request.max_memory or {}).items():
        if device != "disk" and size < block:
            raise ValueError(
                f"max_memory[{device!r}]={size} bytes is smaller than one block ({block} bytes in {dtype}), the "
                "unit a device map never splits; give that device at least this much, or leave it out"
            )
    if request.device_map == "auto":
        device_map = infer_auto_device_map(
            model, max_memory=request.max_memory, no_split_module_classes=["Block"], dtype=dtype
        )
        device_map = _keep_embedding_together(model, dict(device_map))
    else:
        device_map = dict(request.device_map)
        _check_covers(model, device_map)
    _check_embedding(model, device_map)
    if "disk" in device_map.values() and request.offload_folder is None:
        disk = [name for name, device in device_map.items() if device == "disk"]
        raise ValueError(
            f"the device map puts {', '.join(disk[:4])} on disk, but no offload_folder was given; pass "
            "offload_folder=... or a larger max_memory"
        )
    return device_map


def _nbytes(module: nn.Module, dtype: torch.dtype) -> int:
    size = torch.empty((), dtype=dtype).element_size()
    return sum(p.numel() * (size if p.is_floating_point() else p.element_size()) for p in module.parameters())


def _check_covers(model: nn.Module, device_map: dict[str, int | str]) -> None:
    modules = dict(model.named_modules())
    for name in device_map:
        if name not in modules:
            close = difflib.get_close_matches(name, [n for n in modules if n], n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"device_map names {name!r}, which is not a module of this model{hint}")
    unplaced = []
    for param in dict(model.named_parameters()):
        if not any(key == "" or param == key or param.startswith(key + ".") for key in device_map):
            owner = ".".join(param.split(".")[:2]) if param.startswith("blocks.") else param.split(".")[0]
            if owner not in unplaced:
                unplaced.append(owner)
    if unplaced:
        raise ValueError(
            f"device_map leaves {', '.join(unplaced[:6])}{' and more' if len(unplaced) > 6 else ''} unplaced; "
            "give every module a device (top-level modules: "
            f"{', '.join(n for n, _ in model.named_children() if any(True for _ in _.parameters()))})"
        )


def _keep_embedding_together(model: nn.Module, device_map: dict[str, int | str]) -> dict[str, int | str]:
    """With tied embeddings the unembedding reads ``embed.W_E``: put it where the embedding is."""
    if getattr(model, "unembed", None) is not None and model.unembed.W_U is None and "unembed" in device_map:
        embed = next((d for n, d in device_map.items() if n in ("embed", "")), None)
        if embed is not None:
            device_map["unembed"] = embed
    return device_map


def _device_of(device_map: dict[str, int | str], module: str) -> int | str | None:
    best = None
    for key, device in device_map.items():
        if key == "" or module == key or module.startswith(key + "."):
            if best is None or len(key) > len(best[0]):
                best = (key, device)
    return None if best is None else best[1]


def _check_embedding(model: nn.Module, device_map: dict[str, int | str]) -> None:
    computing = {d for d in device_map.values() if d not in ("cpu", "disk")}
    offloaded = ("disk",) if not computing else ("cpu", "disk")
    embed = _device_of(device_map, "embed")
    tied = getattr(model, "unembed", None) is not None and model.unembed.W_U is None
    if embed in offloaded:
        raise ValueError(
            f"device_map puts 'embed' on {embed!r}, which only stores weights here; the token embedding must be "
            f"on a device that computes ({'a GPU' if computing else 'cpu'}), where the inputs go"
        )
    if tied and _device_of(device_map, "unembed") != embed:
        raise ValueError(
            "this model ties its unembedding to the token embedding, so 'unembed' must be on the device of "
            f"'embed' ({embed!r}), not {_device_of(device_map, 'unembed')!r}"
        )


def dispatch(
    model: nn.Module,
    state: dict[str, torch.Tensor],
    device_map: dict[str, int | str],
    dtype: torch.dtype,
    offload_folder: Path | None,
) -> nn.Module:
    """Place each tensor of ``state`` on its device (or write it to disk) and attach accelerate's hooks.

    Disk weights go to a fresh folder inside ``offload_folder``, removed when the model is garbage collected,
    so a stale offload from another model is never read. They are written in their storage order and read
    back as the same permuted view (``interp.model.layout``), so an offloaded block multiplies exactly the
    matrices, in exactly the memory layout, that it does when resident: results equal to the last bit.
    """
    from accelerate import dispatch_model
    from accelerate.utils import offload_weight, save_offload_index

    folder = None
    if "disk" in device_map.values():
        folder = Path(tempfile.mkdtemp(prefix="interp-offload-", dir=offload_folder))
        weakref.finalize(model, shutil.rmtree, folder, True)
    index: dict = {}
    orders: dict[str, list[int]] = {}
    params = model.state_dict(keep_vars=True)

    def place(name: str) -> str | torch.device | None:
        device = _device_of(device_map, name.rpartition(".")[0])
        return torch.device("cuda", device) if isinstance(device, int) else device

    disk = {n for n in state if place(n) == "disk"}
    for name in sorted(disk):  # one tensor in memory at a time
        tensor = state.pop(name)
        tensor = tensor.to(dtype) if tensor.is_floating_point() else tensor
        orders[name] = storage_order(params[name])
        offload_weight(tensor.permute(orders[name]).contiguous(), name, folder, index=index)
    assign_state(model, state, dtype=dtype, place=place, skip=disk, copy=bool(disk))
    model.to(dtype=dtype)  # the buffers no checkpoint holds (sinusoidal positions)
    if folder is not None:
        save_offload_index(index, folder)
    model = dispatch_model(model, device_map, offload_dir=folder, offload_index=index or None)
    if orders:
        _read_in_layout(model, orders)
    return model


def storage_order(tensor: torch.Tensor) -> list[int]:
    """The dimensions of ``tensor`` from outermost to innermost in memory (``[1, 0]`` for a transpose)."""
    return sorted(range(tensor.ndim), key=lambda d: (-tensor.stride(d), d))


class _InLayout(Mapping):
    """accelerate's offloaded weights, each read back as the permuted view the model's parameter is."""

    def __init__(self, weights: Mapping, orders: dict[str, list[int]]) -> None:
        self.weights, self.orders = weights, orders

    def __getitem__(self, key: str) -> torch.Tensor:
        tensor = self.weights[key]
        order = self.orders.get(key)
        if order is None:
            return tensor
        inverse = [order.index(d) for d in range(len(order))]
        return tensor.permute(inverse)  # stored [outermost, ..., innermost] -> the parameter's shape

    def __iter__(self):
        return iter(self.weights)

    def __len__(self) -> int:
        return len(self.weights)


def _read_in_layout(model: nn.Module, orders: dict[str, list[int]]) -> None:
    from accelerate.hooks import SequentialHook
    from accelerate.utils import PrefixedDataset

    wrapped: dict[int, _InLayout] = {}
    for module in model.modules():
        hook = getattr(module, "_hf_hook", None)
        for one in hook.hooks if isinstance(hook, SequentialHook) else [hook]:
            weights = getattr(one, "weights_map", None)
            if isinstance(weights, PrefixedDataset) and not isinstance(weights.dataset, _InLayout):
                inner = weights.dataset
                weights.dataset = wrapped.setdefault(id(inner), _InLayout(inner, orders))
