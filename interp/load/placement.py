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
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from interp.load.assign import assign_state, inverse_order, storage_order
from interp.load.placement_request import Request, check_request

__all__ = ["Request", "check_request", "dispatch", "plan"]


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
        more = " and more" if len(unplaced) > 6 else ""
        weighted = [
            name for name, child in model.named_children() if next(child.parameters(), None) is not None
        ]
        raise ValueError(
            f"device_map leaves {', '.join(unplaced[:6])}{more} unplaced; give every module a device "
            f"(top-level modules: {', '.join(weighted)})"
        )


def _keep_embedding_together(model: nn.Module, device_map: dict[str, int | str]) -> dict[str, int | str]:
    """With tied embeddings the unembedding reads ``embed.W_E``: put it where the embedding is."""
    if getattr(model, "unembed", None) is not None and model.unembed.tied and "unembed" in device_map:
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
    tied = getattr(model, "unembed", None) is not None and model.unembed.tied
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


class _InLayout(Mapping):
    """accelerate's offloaded weights, each read back as the permuted view the model's parameter is."""

    def __init__(self, weights: Mapping, orders: dict[str, list[int]]) -> None:
        self.weights, self.orders = weights, orders

    def __getitem__(self, key: str) -> torch.Tensor:
        tensor = self.weights[key]
        order = self.orders.get(key)
        if order is None:
            return tensor
        return tensor.permute(
            inverse_order(order)
        )  # stored [outermost, ..., innermost] -> the parameter's shape

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
