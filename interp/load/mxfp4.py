"""MXFP4 weights (the OCP microscaling format), as GPT-OSS checkpoints store their experts, dequantized on load.

A weight matrix's rows are cut into groups of 32 values. Each value is a 4-bit float (E2M1: a sign, two
exponent bits, one mantissa bit), one of ``0, 0.5, 1, 1.5, 2, 3, 4, 6`` and their negatives; each group shares
one 8-bit power-of-two scale (E8M0, biased by 127). ``transformers``' checkpoints store a matrix ``W [..., rows,
cols]`` as two tensors: ``name_blocks`` ``[..., rows, cols / 32, 16]`` (uint8, two values a byte, the lower
nibble first) and ``name_scales`` ``[..., rows, cols / 32]`` (uint8). ``W[..., r, 32 g + 2 i + j]`` is nibble
``j`` of ``blocks[..., r, g, i]`` times ``2 ** (scales[..., r, g] - 127)``.

:func:`dequantize` writes bfloat16, one leading index (one expert) at a time, so that loading needs the
dequantized weights and one expert's packed bytes and temporaries (each expert's pages of a memory-mapped
file are handed back once read, :func:`interp.load.assign.hand_back_pages`). bfloat16 holds every MXFP4 value exactly
(at most two significant bits, times a power of two within float32's exponent range, whose smallest, ``0.5 *
2 ** -127``, bfloat16's subnormals reach), so the weights are the same in whichever dtype the model is loaded:
each is converted once, when assigned (:mod:`interp.load.assign`), never through a float32 copy of them all.
GGUF files store MXFP4 in GGML's own blocks; :mod:`interp.load.gguf_file` reads them to bfloat16 the same way.
"""

from __future__ import annotations

import torch

from interp.load.assign import file_mappings, hand_back_pages
from interp.load.errors import CheckpointError

GROUP = 32  # values per scale
# The 16 values of a 4-bit E2M1 code, by code.
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
_EXPONENT_BIAS = 127


def dequantize(blocks: torch.Tensor, scales: torch.Tensor, name: str) -> torch.Tensor:
    """``name_blocks`` and ``name_scales`` -> the matrix ``[..., rows, cols]``, in bfloat16 (exact).

    Args:
        blocks: ``[..., rows, cols / 32, 16]`` uint8.
        scales: ``[..., rows, cols / 32]`` uint8.
        name: the weight's name, for errors.

    >>> blocks = torch.tensor([[[[0x21] + [0] * 15]]], dtype=torch.uint8)  # values 0.5 (code 1), 1.0 (code 2)
    >>> dequantize(blocks, torch.tensor([[[128]]], dtype=torch.uint8), "w")[0, 0, :3]  # scale 2 ** 1
    tensor([1., 2., 0.], dtype=torch.bfloat16)
    """
    for tensor, what in ((blocks, "blocks"), (scales, "scales")):
        if tensor.dtype != torch.uint8:
            raise CheckpointError(
                f"{name}_{what} has dtype {tensor.dtype}; MXFP4 stores its {what} as uint8, so this is not an "
                "MXFP4 tensor as transformers writes one"
            )
    if blocks.ndim < 2 or blocks.shape[-1] != GROUP // 2 or blocks.shape[:-1] != scales.shape:
        raise CheckpointError(
            f"{name}_blocks has shape {list(blocks.shape)} and {name}_scales {list(scales.shape)}; MXFP4 needs "
            f"blocks [..., rows, groups, {GROUP // 2}] and scales [..., rows, groups]"
        )
    *lead, rows, groups, _ = blocks.shape
    out = torch.empty(*lead, rows, groups * GROUP, dtype=torch.bfloat16)
    table = torch.tensor(FP4_VALUES, dtype=torch.float32)
    flat_blocks = blocks.reshape(-1, rows, groups, GROUP // 2)  # one leading index (an expert) at a time
    flat_scales = scales.reshape(-1, rows, groups)
    flat_out = out.view(-1, rows, groups, GROUP)
    files = file_mappings()
    for i in range(flat_blocks.shape[0]):
        packed = flat_blocks[i].long()  # [rows, groups, 16]
        values = torch.stack((table[packed & 0x0F], table[packed >> 4]), dim=-1)  # [rows, groups, 16, 2]
        scale = torch.exp2(flat_scales[i].float() - _EXPONENT_BIAS)  # [rows, groups], exact powers of two
        flat_out[i].copy_(values.view(rows, groups, GROUP) * scale[..., None])  # exact in bfloat16
        hand_back_pages(flat_blocks[i], files)
        hand_back_pages(flat_scales[i], files)
    return out
