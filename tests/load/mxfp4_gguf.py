"""GPT-OSS GGUF files with MXFP4 experts, written by the tests as llama.cpp's converter lays them out.

The parity tests convert with llama.cpp's own converter, which only knows tokenizers by their hash (SmolLM2's
49,152 tokens for the tiny models), so a file large in its experts would be larger still in its embeddings.
The memory and bit-equality tests need the experts to dominate, so they write the file here, with the tests'
300-token byte-level BPE: the tensor names, metadata and MXFP4 blocks of ``convert_hf_to_gguf.py``'s
``GptOssModel`` (experts stacked per projection, gate and up rows de-interleaved, float32 elsewhere).

A GGML MXFP4 block is 17 bytes for 32 values: the E8M0 scale byte ``e``, then 16 bytes whose lower nibbles are
values 0-15 and upper nibbles values 16-31, each code ``c`` meaning ``2 * FP4[c] * 2 ** (e - 128)`` in float32,
which is ``FP4[c] * 2 ** (e - 127)``: the same code and scale byte as ``transformers``' layout, the nibbles
reordered (GGML reads the scale byte 255 as ``2 ** 128``, not as the format's NaN).
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch
from tokenizers import Tokenizer as Backend

from tests.load.builders import FP4, _add_tokenizer, add_shape, quantize_mxfp4

BLOCK_BYTES = 17
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "self_attn.sinks": "attn_sinks.weight",
    "mlp.router.weight": "ffn_gate_inp.weight",
    "mlp.router.bias": "ffn_gate_inp.bias",
    **{f"self_attn.{p}_proj.{k}": f"attn_{p}.{k}" for p in "qkv" for k in ("weight", "bias")},
    **{f"self_attn.o_proj.{k}": f"attn_output.{k}" for k in ("weight", "bias")},
}
_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}


def ggml_mxfp4(weight: torch.Tensor) -> np.ndarray:
    """``[..., rows, cols]`` float -> GGML MXFP4 bytes ``[..., rows, cols / 32 * 17]`` (uint8)."""
    blocks, scales = quantize_mxfp4(weight)  # transformers' layout: codes 2i, 2i + 1 in byte i
    codes = torch.stack((blocks & 0x0F, blocks >> 4), -1).flatten(-2)  # [..., rows, groups, 32]
    packed = codes[..., :16] | (codes[..., 16:] << 4)  # GGML: codes i, i + 16 in byte i
    ggml = torch.cat((scales[..., None], packed), -1)  # [..., rows, groups, 17]
    return ggml.flatten(-2).numpy()


def decode_ggml_mxfp4(data: np.ndarray) -> torch.Tensor:
    """The tests' own reading of GGML MXFP4 bytes ``[..., rows, groups * 17]``: ``[..., rows, cols]`` float32."""
    blocks = torch.from_numpy(np.array(data)).unflatten(-1, (-1, BLOCK_BYTES))
    scale, packed = blocks[..., 0], blocks[..., 1:].long()
    values = torch.cat((FP4[packed & 0x0F], FP4[packed >> 4]), -1)  # [..., rows, groups, 32]
    half_scale = torch.exp2(scale.double() - 128).float()  # exact: 2 ** -128 (subnormal) to 2 ** 127
    return (2 * values * half_scale[..., None]).flatten(-2)  # overflows to infinity as GGML's float32 does


def write_gpt_oss_gguf(model: torch.nn.Module, backend: Backend, path: Path) -> Path:
    """A ``transformers`` GPT-OSS model as a GGUF file with its experts in MXFP4, the rest float32."""
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "gpt-oss")
    writer.add_name("tiny-gpt-oss")
    add_shape(writer, cfg)
    writer.add_expert_feed_forward_length(cfg.intermediate_size)
    writer.add_key_length(cfg.head_dim)
    writer.add_value_length(cfg.head_dim)
    writer.add_expert_count(cfg.num_local_experts)
    writer.add_expert_used_count(cfg.num_experts_per_tok)
    writer.add_sliding_window(cfg.sliding_window)
    rope = cfg.rope_parameters
    if rope["rope_type"] == "yarn":
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rope["factor"])
        writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        writer.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
        writer.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
    writer.add_vocab_size(cfg.vocab_size)
    _add_tokenizer(writer, backend, add_bos=False)
    state = model.state_dict()
    for name, tensor in state.items():
        data = tensor.detach().float()
        if name == "lm_head.weight":
            writer.add_tensor("output.weight", data.numpy())
        elif name in _GLOBAL:
            writer.add_tensor(_GLOBAL[name], data.numpy())
        else:
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            for target, value, quantized in _layer_tensors(rest, data):
                if quantized:
                    writer.add_tensor(
                        f"blk.{layer}.{target}", value, raw_dtype=gguf.GGMLQuantizationType.MXFP4
                    )
                else:
                    writer.add_tensor(f"blk.{layer}.{target}", value.numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _layer_tensors(name: str, data: torch.Tensor) -> list[tuple[str, np.ndarray | torch.Tensor, bool]]:
    """A layer's tensor as the converter writes it: ``(GGUF name, values, stored in MXFP4)``."""
    if name == "mlp.experts.gate_up_proj":  # [expert, in, 2 * out], gate and up columns interleaved
        rows = data.transpose(1, 2)  # [expert, 2 * out, in]
        return [
            ("ffn_gate_exps.weight", ggml_mxfp4(rows[:, 0::2].contiguous()), True),
            ("ffn_up_exps.weight", ggml_mxfp4(rows[:, 1::2].contiguous()), True),
        ]
    if name == "mlp.experts.down_proj":  # [expert, in, out]
        return [("ffn_down_exps.weight", ggml_mxfp4(data.transpose(1, 2).contiguous()), True)]
    if name == "mlp.experts.gate_up_proj_bias":
        return [("ffn_gate_exps.bias", data[:, 0::2], False), ("ffn_up_exps.bias", data[:, 1::2], False)]
    if name == "mlp.experts.down_proj_bias":
        return [("ffn_down_exps.bias", data, False)]
    return [(_LAYER[name], data, False)]
