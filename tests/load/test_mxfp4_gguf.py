"""MXFP4 tensors of GGUF files, dequantized straight to bfloat16, equal bit for bit to their float32 values.

The reader writes each MXFP4 tensor in bfloat16, a chunk of rows at a time, so that loading never holds a
float32 copy of the experts. That is only right if every MXFP4 value is a bfloat16: checked here on a tensor
holding every code under every scale byte (subnormal scales, and those whose values overflow float32 to
infinity), against the tests' own decoding of the bytes and against gguf's float32 dequantization (what the
reader returned before), and on a GPT-OSS file loaded in float32 and in bfloat16.
"""

from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize

from interp.load import load
from interp.load.gguf_file import GGUFFile
from tests.load.builders import byte_level_bpe
from tests.load.families import build
from tests.load.mxfp4_gguf import BLOCK_BYTES, decode_ggml_mxfp4, write_gpt_oss_gguf


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int16)


@pytest.mark.filterwarnings("ignore:overflow encountered in multiply:RuntimeWarning")  # the top scales
def test_every_code_under_every_scale_reads_exactly_in_bfloat16(tmp_path):
    experts, rows, groups = 3, 1000, 8  # 3000 rows of 256 values: more than one chunk, the last one short
    blocks = torch.randint(
        0, 256, (experts, rows, groups, BLOCK_BYTES), generator=torch.Generator().manual_seed(0)
    )
    blocks[..., 0] = (
        torch.arange(experts * rows * groups).view(experts, rows, groups) % 256
    )  # every scale byte
    blocks[0, 0, 0, 1:9] = torch.tensor([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE])  # every code
    data = blocks.to(torch.uint8).flatten(-2).numpy()
    path = tmp_path / "mxfp4.gguf"
    writer = gguf.GGUFWriter(str(path), "gpt-oss")
    writer.add_tensor("blk.0.ffn_down_exps.weight", data, raw_dtype=gguf.GGMLQuantizationType.MXFP4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    read = GGUFFile(path).tensors()["blk.0.ffn_down_exps.weight"]
    assert read.dtype == torch.bfloat16 and read.shape == (experts, rows, groups * 32)
    ours = decode_ggml_mxfp4(data)  # float32, value by value
    assert torch.isinf(ours).any() and (ours.abs() < 2.0**-126).logical_and(ours != 0).any()  # the edges
    assert torch.equal(ours.bfloat16().float(), ours)  # every value is a bfloat16
    assert torch.equal(read.float(), ours)  # equal values (GGML reads code 8, -0, as +0)
    theirs = torch.from_numpy(np.array(dequantize(data, gguf.GGMLQuantizationType.MXFP4), dtype=np.float32))
    assert torch.equal(read.float(), theirs)
    assert torch.equal(_bits(read), _bits(theirs.bfloat16()))  # what the float32 reading gave, bit for bit


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_gpt_oss_file_loads_the_experts_bytes_exactly_in_either_dtype(dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    reference = build("gpt-oss", 300, None, widen=False, swiglu_limit=7.0)
    path = write_gpt_oss_gguf(reference, byte_level_bpe(), tmp_path / "gpt-oss.gguf")
    stored = {t.name: t.data for t in gguf.GGUFReader(path).tensors}
    for cached in (False, True):  # the first load dequantizes and fills the cache; the second reads it
        model = load(path, dtype=dtype)
        for layer, block in enumerate(model.blocks):
            for ours, name in ((block.mlp.W_gate, "gate"), (block.mlp.W_in, "up"), (block.mlp.W_out, "down")):
                expected = decode_ggml_mxfp4(stored[f"blk.{layer}.ffn_{name}_exps.weight"]).transpose(1, 2)
                assert ours.dtype == dtype, (cached, name)
                assert torch.equal(ours, expected.to(dtype)), (cached, layer, name)
