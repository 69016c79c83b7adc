"""Shard files: safetensors written in one streaming pass and committed atomically, read back by memmap.

A shard is written to ``NAME.tmp``, flushed and fsynced, then renamed over ``NAME`` (and the folder fsynced),
so a file with a final name is always complete: a run killed mid-write leaves only a ``.tmp`` file, which a
resumed run overwrites (:func:`interp.atomic.write_atomic`). The writer streams each tensor's bytes straight
from its buffer into the file instead of calling ``safetensors.torch.save_file``, which first copies every
tensor into one bytes object: that copy would double the writer's peak memory. The layout is the safetensors
format (an 8-byte header length, a JSON header, the raw little-endian data), so every safetensors reader opens
these files.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interp.atomic import write_atomic

_CODES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_NUMPY = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def write_safetensors(path: Path, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> int:
    """Write ``tensors`` (contiguous CPU tensors) and string ``metadata`` to ``path`` atomically.

    Returns:
        The file's size in bytes.
    """
    header: dict[str, Any] = {"__metadata__": dict(metadata)}
    offset = 0
    for name, tensor in tensors.items():
        if tensor.dtype not in _CODES:
            raise TypeError(
                f"cannot store {name!r} of dtype {tensor.dtype}; use one of {sorted(map(str, _CODES))}"
            )
        header[name] = {
            "dtype": _CODES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + tensor.nbytes],
        }
        offset += tensor.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(encoded)))
            f.write(encoded)
            for tensor in tensors.values():
                f.write(_raw(tensor).data)

    write_atomic(path, write)
    return 8 + len(encoded) + offset


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (tmp, fsync, rename)."""
    write_atomic(
        path, lambda tmp: tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", "utf-8")
    )


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON header of a safetensors file and the byte offset where its data starts."""
    with open(path, "rb") as f:
        size = f.read(8)
        if len(size) < 8:
            raise ValueError(f"{path} is not a safetensors file (shorter than 8 bytes)")
        (length,) = struct.unpack("<Q", size)
        try:
            header = json.loads(f.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} has a corrupt safetensors header ({err})") from err
    return header, 8 + length


def memmap(path: Path, name: str, header: dict[str, Any], data_start: int) -> np.ndarray:
    """A read-only memory map of one tensor of a safetensors file (no copy; pages load as they are read)."""
    entry = header[name]
    if entry["dtype"] not in _NUMPY:
        raise TypeError(
            f"{name!r} is stored as {entry['dtype']}, which numpy cannot represent; read it with .tensor()"
        )
    dtype, shape = np.dtype(_NUMPY[entry["dtype"]]), tuple(entry["shape"])
    if 0 in shape:
        return np.empty(shape, dtype)
    return np.memmap(path, dtype, mode="r", offset=data_start + entry["data_offsets"][0], shape=shape)


def _raw(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: write its bits
        tensor = tensor.view(torch.int16)
    return tensor.numpy()
