"""GPT-OSS checkpoints whose experts are stored in MXFP4, as the released ones are, against ``transformers``.

The test writes such a checkpoint itself: a tiny random GPT-OSS (``tests/load/families.py``) whose experts
are quantized by the tests' own writer of the format (:func:`tests.load.builders.quantize_mxfp4`) into
``*_blocks`` and ``*_scales`` as ``transformers``' MXFP4 quantizer stores them, with
``quantization_config.quant_method = "mxfp4"`` in ``config.json``.
``transformers`` loads it by dequantizing (on a CPU without its MXFP4 kernels), interp by
:mod:`interp.load.mxfp4`: the experts must be equal bit for bit, and to the test's own decoding of the bytes,
and the logits equal to float32 tolerance.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from interp.load import load
from interp.load.errors import CheckpointError
from tests.load.builders import byte_level_bpe, decode_mxfp4, mxfp4_experts, quantize_mxfp4, save_folder
from tests.load.families import build
from tests.load.test_families import ATOL  # the parity tests' tolerance: the same model, other weights

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A float GPT-OSS folder rewritten with MXFP4 experts; returns the folder and the packed tensors."""
    tokenizer = byte_level_bpe()
    folder = tmp_path_factory.mktemp("gpt-oss-mxfp4")
    save_folder(build("gpt-oss", tokenizer.get_vocab_size()), tokenizer, folder)
    packed = mxfp4_experts(folder)
    return folder, packed


def test_the_experts_dequantize_as_transformers_dequantizes_them(checkpoint):
    folder, packed = checkpoint
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    model = load(folder)
    for layer in range(model.cfg.n_layers):
        theirs = reference.model.layers[layer].mlp.experts
        mlp = model.blocks[layer].mlp
        prefix = f"model.layers.{layer}.mlp.experts."
        ours_gate_up = torch.stack((mlp.W_gate, mlp.W_in), -1).flatten(
            -2
        )  # interleaved, [expert, in, 2 * out]
        torch.testing.assert_close(ours_gate_up, theirs.gate_up_proj, rtol=0, atol=0)
        torch.testing.assert_close(mlp.W_out, theirs.down_proj, rtol=0, atol=0)
        decoded = decode_mxfp4(packed[prefix + "gate_up_proj_blocks"], packed[prefix + "gate_up_proj_scales"])
        torch.testing.assert_close(ours_gate_up, decoded.transpose(1, 2), rtol=0, atol=0)
    ids, mask = model.to_tokens(["The animal didn't cross the street.", "Routing, in four bits"])
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        ours = model(ids, mask)
    real = mask.bool()
    torch.testing.assert_close(ours[real], expected[real], atol=ATOL, rtol=ATOL)


def test_the_quantization_is_not_the_identity(checkpoint):
    """Rounding to four bits moves the weights: the checks above compare dequantized values, not the floats."""
    folder, packed = checkpoint
    original = build("gpt-oss", byte_level_bpe().get_vocab_size()).model.layers[0].mlp.experts.down_proj
    decoded = decode_mxfp4(
        packed["model.layers.0.mlp.experts.down_proj_blocks"],
        packed["model.layers.0.mlp.experts.down_proj_scales"],
    )
    error = (decoded.transpose(1, 2) - original).abs().max()
    assert 1e-3 < error < 0.5 * original.abs().max()


def test_mxfp4_tensors_outside_the_experts_are_refused(checkpoint, tmp_path):
    folder, packed = checkpoint
    for item in folder.iterdir():
        (tmp_path / item.name).write_bytes(item.read_bytes())
    tensors = load_file(tmp_path / "model.safetensors")
    blocks, scales = quantize_mxfp4(tensors.pop("model.layers.0.self_attn.q_proj.weight"))
    tensors["model.layers.0.self_attn.q_proj.weight_blocks"] = blocks
    tensors["model.layers.0.self_attn.q_proj.weight_scales"] = scales
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"q_proj.weight_blocks.*only the experts' weights"):
        load(tmp_path)


def test_another_quantization_of_gpt_oss_is_refused(checkpoint, tmp_path):
    folder, _ = checkpoint
    for item in folder.iterdir():
        (tmp_path / item.name).write_bytes(item.read_bytes())
    config = json.loads((tmp_path / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "bitsandbytes"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"quant_method='bitsandbytes' is not supported.*\['mxfp4'\]"):
        load(tmp_path)
