"""Reading a GGUF file: metadata, and every tensor dequantized to float32.

``gguf.GGUFReader`` parses the file; ``gguf.quants.dequantize`` expands each block format. A type outside
:data:`SUPPORTED_TYPES` raises naming the tensor and its type instead of loading something approximate, and
a tensor whose bytes are fewer than its shape needs (a truncated download) raises naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

from interp.load.errors import CheckpointError

SUPPORTED_TYPES = (
    Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K,
    Q.MXFP4,
)  # fmt: skip

_MISSING = object()


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
        """Every tensor, dequantized to float32, shaped ``[rows, cols]`` like the PyTorch original."""
        return {t.name: self._dequantize(t) for t in self._reader.tensors}

    def _dequantize(self, tensor: gguf.ReaderTensor) -> torch.Tensor:
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
        values = dequantize(tensor.data.view(np.ndarray), qtype)  # a plain array: memmap slicing is slow
        return torch.from_numpy(np.array(values, dtype=np.float32).reshape(shape))  # a writable copy
