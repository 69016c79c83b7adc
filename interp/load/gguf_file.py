"""Reading a GGUF file: metadata, and every tensor dequantized, MXFP4 to bfloat16 and the rest to float32.

``gguf.GGUFReader`` parses the file; ``gguf.quants.dequantize`` expands each block format. A type outside
:data:`SUPPORTED_TYPES` raises naming the tensor and its type instead of loading something approximate, and
a tensor whose bytes are fewer than its shape needs (a truncated download) raises naming the file.

Memory: the file is memory-mapped, and each tensor's pages are handed back to the kernel once its copy exists
(:func:`interp.load.assign.hand_back_range`), so reading never holds the file beside the weights. MXFP4 tensors
(GPT-OSS's experts) are dequantized a few million values at a time into bfloat16, which holds every MXFP4 value
exactly (:mod:`interp.load.mxfp4`): the weights are then the same in whichever dtype they are assigned, and
loading in bfloat16 never holds a float32 copy of the experts (2.46x the weights when every tensor was
dequantized to float32 whole; now 1.1x, ``tests/load/test_load_memory.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

from interp.load.assign import file_mappings, hand_back_range
from interp.load.errors import CheckpointError

SUPPORTED_TYPES = (
    Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K,
    Q.MXFP4,
)  # fmt: skip

_MISSING = object()
_CHUNK_VALUES = 1 << 18  # MXFP4 values dequantized at once: 1 MB of float32, a few times that in temporaries


class GGUFFile:
    """An open GGUF file.

    Args:
        path: the ``.gguf`` file.

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: not a GGUF file, or one that is truncated or corrupt.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no GGUF file at {self.path}")
        with self.path.open("rb") as f:
            magic = f.read(4)
        if magic != b"GGUF":
            raise CheckpointError(f"{self.path} is not a GGUF file: it starts with {magic!r}, not b'GGUF'")
        try:
            self._reader = gguf.GGUFReader(self.path)
        except Exception as err:  # the reader raises whatever numpy or struct raise on bad bytes
            raise CheckpointError(
                f"{self.path} is not a readable GGUF file; it is probably truncated or corrupt "
                f"({type(err).__name__}: {err}). Copy or download it again"
            ) from err

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The metadata value ``key`` (a number, string, bool or list); raises if absent and no default."""
        field = self._reader.fields.get(key)
        if field is None:
            if default is _MISSING:
                raise CheckpointError(f"{self.path} has no metadata key {key!r}, which loading it needs")
            return default
        return field.contents()

    def keys(self) -> list[str]:
        """All metadata keys."""
        return list(self._reader.fields)

    @property
    def architecture(self) -> str:
        """``general.architecture`` (e.g. ``"llama"``)."""
        return self.get("general.architecture")

    def tensor_names(self) -> list[str]:
        """The GGUF names of the tensors (``blk.0.attn_q.weight``...)."""
        return [t.name for t in self._reader.tensors]

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor, shaped ``[rows, cols]`` like the PyTorch original: MXFP4 in bfloat16 (exact), every
        other type dequantized to float32."""
        files = file_mappings()
        return {t.name: self._dequantize(t, files) for t in self._reader.tensors}

    def _dequantize(self, tensor: gguf.ReaderTensor, files: list[tuple[int, int]]) -> torch.Tensor:
        qtype = tensor.tensor_type
        if qtype not in SUPPORTED_TYPES:
            raise CheckpointError(
                f"{self.path}: tensor {tensor.name!r} has type {qtype.name}, which this loader cannot "
                f"dequantize; supported: {[t.name for t in SUPPORTED_TYPES]}. "
                "Re-quantize the model to one of them"
            )
        block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))  # GGUF lists the fastest axis first
        expected = int(np.prod(shape)) // block * block_bytes
        if tensor.data.nbytes != expected:
            raise CheckpointError(
                f"{self.path}: tensor {tensor.name!r} has {tensor.data.nbytes} bytes of data, but a "
                f"{qtype.name} tensor of shape {list(shape)} needs {expected}; "
                "the file is truncated or corrupt"
            )
        data = tensor.data.view(np.ndarray)  # a plain array: memmap slicing is slow
        if qtype == Q.MXFP4:
            return _mxfp4(data, shape, files)
        values = dequantize(data, qtype)
        if np.may_share_memory(values, data):  # F32: the file's own read-only bytes
            values = values.copy()
        hand_back_range(data.ctypes.data, data.nbytes, files)
        return torch.from_numpy(values.astype(np.float32, copy=False).reshape(shape))


def _mxfp4(data: np.ndarray, shape: tuple[int, ...], files: list[tuple[int, int]]) -> torch.Tensor:
    """MXFP4 bytes ``[..., rows, row bytes]`` -> ``shape`` in bfloat16, a chunk of rows at a time, each
    chunk's pages of the file handed back once read.

    gguf's float32 values are each a bfloat16 (two significant bits at most, ``2 ** -128`` to infinity), so
    the upper half of each float32's bits is that bfloat16 exactly: this equals dequantizing in float32 and
    converting, bit for bit, without a float32 copy of the tensor or a torch call per chunk.
    """
    rows = data.reshape(-1, data.shape[-1])  # [all rows, row bytes]
    out = torch.empty(shape, dtype=torch.bfloat16)
    bits = out.view(torch.int16).numpy().view(np.uint16).reshape(rows.shape[0], shape[-1])  # [all rows, cols]
    step = max(1, _CHUNK_VALUES // bits.shape[1])
    for start in range(0, rows.shape[0], step):
        chunk = rows[start : start + step]
        values = dequantize(chunk, Q.MXFP4).view(np.uint32)  # [chunk rows, cols], float32 bits
        np.right_shift(values, 16, out=bits[start : start + step], casting="unsafe")
        hand_back_range(chunk.ctypes.data, chunk.nbytes, files)
    return out
