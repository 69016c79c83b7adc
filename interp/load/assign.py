"""Putting a checkpoint's tensors into a built model without a second copy of the weights.

``load_state_dict`` copies every tensor into parameters the constructor allocated, so loading needed the
checkpoint and the model in memory at once (2.06x the model's float32 size for a float32 folder). Here each
parameter is *replaced* by the checkpoint's tensor: safetensors tensors are memory-mapped, so a float32
checkpoint loaded in float32 on the CPU is never copied at all, and any other target is converted once, one
tensor at a time, the source released as soon as its converted copy exists. The constructor's parameters are
never written, so their memory is never touched (or they are on the meta device to begin with).

A replacement keeps the parameter's memory layout (``interp.model.layout``): a tensor whose strides differ is
copied into that layout, so the forward pass runs exactly as on a model built by the constructor.

A tensor converted from a memory-mapped checkpoint file leaves the file's pages resident once read, so loading
a bfloat16 file in float32 (or a float32 file in bfloat16) held the whole file beside the converted weights.
After each conversion the pages of its source are handed back to the kernel (``madvise(MADV_DONTNEED)``, on
Linux, and only inside mappings of files): they are clean pages of a file opened read-only, so reading them
again reads the file, but nothing keeps them resident (:func:`interp.allocator.drop_file_pages`, the one place
the C library is called). Loading then peaks near the weights in the dtype asked for, whatever the checkpoint
stores.
"""

from __future__ import annotations

import mmap
import sys
from collections.abc import Callable

import torch
from torch import nn

from interp.allocator import drop_file_pages
from interp.load.errors import CheckpointError

Placement = Callable[[str], torch.device | str | None]


def assign_state(
    model: nn.Module,
    state: dict[str, torch.Tensor],
    *,
    dtype: torch.dtype | None,
    place: Placement,
    source: str = "the checkpoint",
    skip: frozenset[str] | set[str] = frozenset(),
    copy: bool = False,
) -> None:
    """Replace every parameter and persistent buffer of ``model`` by the tensor of the same name in ``state``.

    ``state`` is emptied as it is read, so nothing keeps a source alive once its converted copy exists.

    Args:
        model: a built model; its own tensors may be uninitialised or on the meta device.
        state: name -> tensor, exactly the model's ``state_dict`` names.
        dtype: the floating dtype to convert to (``None``: keep the checkpoint's float32).
        place: name -> the device the tensor goes to, or ``None`` to leave it where it is.
        source: named in the error about mismatched names.
        skip: names already dealt with (weights offloaded to disk); their parameters stay as they are.
        copy: give every tensor memory of its own even where the checkpoint's could be kept, so that no
            parameter holds the checkpoint's memory map open (for a model whose other weights live on disk).

    Raises:
        CheckpointError: ``state`` lacks a name the model has, or has one it lacks.
    """
    targets = model.state_dict(keep_vars=True)
    files = file_mappings()
    missing = sorted(set(targets) - set(state) - set(skip))
    unexpected = sorted(set(state) - set(targets))
    if missing or unexpected:
        raise CheckpointError(
            f"{source} does not match the model built from its config: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    for name, current in targets.items():
        if name in skip:
            continue
        source_tensor = state.pop(name)
        placed = placed_like(source_tensor, current, place(name), dtype, copy=copy)
        if placed is not source_tensor:
            hand_back_pages(source_tensor, files)
        del source_tensor
        module_path, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_path)
        if leaf in module._parameters:
            module._parameters[leaf] = nn.Parameter(placed, requires_grad=current.requires_grad)
        else:
            module._buffers[leaf] = placed


def placed_like(
    tensor: torch.Tensor,
    like: torch.Tensor,
    device: torch.device | str | None,
    dtype: torch.dtype | None,
    *,
    copy: bool = False,
) -> torch.Tensor:
    """``tensor`` on ``device`` in ``dtype`` (floating tensors only) with the strides of ``like``; ``tensor``
    itself when nothing changes (unless ``copy``), otherwise one conversion."""
    dtype = dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype
    device = torch.device(device) if device is not None else tensor.device
    same = tensor.stride() == like.stride() and tensor.dtype == dtype and tensor.device == device
    if same and not copy:
        return tensor
    out = torch.empty_strided(like.shape, like.stride(), dtype=dtype, device=device)
    return out.copy_(tensor)


def storage_order(tensor: torch.Tensor) -> list[int]:
    """The dimensions of ``tensor`` from outermost to innermost in memory (``[1, 0]`` for a transpose).

    ``tensor.permute(order).contiguous()`` is then a copy-free view for a tensor stored densely, and
    ``.permute(inverse)`` of it gives back the tensor's own shape and strides.
    """
    return sorted(range(tensor.ndim), key=lambda d: (-tensor.stride(d), d))


def inverse_order(order: list[int]) -> list[int]:
    """The permutation that undoes ``order``."""
    return [order.index(d) for d in range(len(order))]


def file_mappings() -> list[tuple[int, int]]:
    """The address ranges of this process's mappings of files (``/proc/self/maps``); empty off Linux."""
    if not sys.platform.startswith("linux"):
        return []
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            # address perms offset dev inode path: a file has an inode; [heap], [stack] and anonymous maps not
            if len(fields) == 6 and fields[4] != "0" and fields[5].startswith("/"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((start, end))
    return ranges


def hand_back_pages(tensor: torch.Tensor, files: list[tuple[int, int]]) -> None:
    """Drop from the resident set the whole pages that ``tensor`` spans, if they lie in a mapping of a file.

    Only for tensors read from checkpoint files and never written, as :func:`assign_state`'s are: the pages are
    then the file's own, read again from it if touched. Memory that is not a file mapping is left alone.
    """
    if tensor.device.type != "cpu" or tensor.numel() == 0 or not files:
        return
    size = tensor.element_size()
    span = size * (1 + sum((n - 1) * abs(s) for n, s in zip(tensor.shape, tensor.stride(), strict=True)))
    hand_back_range(tensor.data_ptr(), span, files)


def hand_back_range(start: int, nbytes: int, files: list[tuple[int, int]]) -> None:
    """:func:`hand_back_pages` for the ``nbytes`` bytes from address ``start`` (a NumPy view of a memory-mapped
    file: ``array.ctypes.data``, ``array.nbytes``), under the same condition: read from a file, never written."""
    if nbytes <= 0 or not files:
        return
    end = start + nbytes
    page = mmap.PAGESIZE
    first, last = -(-start // page) * page, end // page * page  # the whole pages inside the tensor
    if last <= first or not any(lo <= first and last <= hi for lo, hi in files):
        return
    drop_file_pages(first, last - first)
