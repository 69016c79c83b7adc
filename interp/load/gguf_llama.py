"""GGUF files of architecture ``llama`` -> the Llama family's Hugging Face config and tensor names.

llama.cpp's converter renames every tensor and, for rotary attention, permutes the rows of the Q and K
projections: within each head it interleaves the two rotated halves, ``(two, half) -> (half, two)``, because
its kernels rotate adjacent pairs while Hugging Face rotates ``i`` with ``i + d_head / 2``
(``reshape(n_head, 2, d_head // 2, d_model).swapaxes(1, 2)`` in ``convert_hf_to_gguf.py``). We undo that
permutation here, so the Llama converter and the model see the Hugging Face ("rotate half") layout.
"""

from __future__ import annotations

import re

import torch
from einops import rearrange

from interp.load.errors import CheckpointError
from interp.load.gguf_file import GGUFFile
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.bias": "self_attn.o_proj.bias",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_LAYER = re.compile(r"blk\.(\d+)\.(.+)")


def unpermute_rotary_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: per head, rows ``(half, two)`` -> ``(two, half)``.

    Args:
        weight: ``[n_heads * d_head, ...]`` as stored in the GGUF file (a weight, or a 1-D bias).
        n_heads: heads of this projection (``n_kv_heads`` for K).
    """
    return rearrange(weight, "(h half two) ... -> (h two half) ...", h=n_heads, two=2)


def permute_rotary_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """llama.cpp's permutation (the inverse of :func:`unpermute_rotary_rows`), for writing test files."""
    return rearrange(weight, "(h two half) ... -> (h half two) ...", h=n_heads, two=2)


def to_hf(file: GGUFFile) -> tuple[HFConfig, TensorSource]:
    """The Llama-family ``config.json`` and tensors that a llama GGUF file describes."""
    hf = HFConfig(_config(file), str(file.path))
    names = set(file.tensor_names())
    if "rope_freqs.weight" in names:
        raise CheckpointError(
            f"{file.path} has 'rope_freqs.weight' (Llama 3.1-style rotary scaling), which is not "
            "implemented; loading it as plain rotary would silently change every position"
        )
    n_heads, n_kv_heads = hf.require("num_attention_heads"), hf.require("num_key_value_heads")
    tensors = {}
    for name, tensor in file.tensors().items():
        hf_name = _hf_name(name, str(file.path))
        if ".q_proj." in hf_name:
            tensor = unpermute_rotary_rows(tensor, n_heads)
        elif ".k_proj." in hf_name:
            tensor = unpermute_rotary_rows(tensor, n_kv_heads)
        tensors[hf_name] = tensor
    hf.values["tie_word_embeddings"] = "lm_head.weight" not in tensors
    return hf, TensorSource(tensors, str(file.path))


def _config(file: GGUFFile) -> dict:
    arch = "llama"
    d_model, n_heads = file.get(f"{arch}.embedding_length"), file.get(f"{arch}.attention.head_count")
    n_kv_heads = file.get(f"{arch}.attention.head_count_kv", n_heads)
    if not isinstance(n_kv_heads, int):
        raise CheckpointError(f"{file.path}: per-layer head counts ({n_kv_heads!r}) are not supported")
    d_head = file.get(f"{arch}.attention.key_length", d_model // n_heads)
    rotary = file.get(f"{arch}.rope.dimension_count", d_head)
    if rotary != d_head:
        raise CheckpointError(
            f"{file.path}: rope.dimension_count={rotary} differs from d_head={d_head}; not supported"
        )
    scaling = file.get(f"{arch}.rope.scaling.type", "none")
    if scaling != "none":
        raise CheckpointError(
            f"{file.path}: rotary scaling {scaling!r} is not implemented; loading it as plain rotary would "
            "silently change every position"
        )
    vocab = file.get(f"{arch}.vocab_size", None) or len(file.get("tokenizer.ggml.tokens"))
    return {
        "model_type": "llama",
        "_name_or_path": file.get("general.name", file.path.stem),
        "hidden_size": d_model,
        "num_hidden_layers": file.get(f"{arch}.block_count"),
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv_heads,
        "head_dim": d_head,
        "intermediate_size": file.get(f"{arch}.feed_forward_length"),
        "vocab_size": vocab,
        "max_position_embeddings": file.get(f"{arch}.context_length"),
        "rms_norm_eps": file.get(f"{arch}.attention.layer_norm_rms_epsilon"),
        "rope_theta": file.get(f"{arch}.rope.freq_base", 10000.0),
        "hidden_act": "silu",
        "attention_bias": "blk.0.attn_output.bias" in file.tensor_names(),
    }


def _hf_name(name: str, source: str) -> str:
    if name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[name]
    match = _LAYER.fullmatch(name)
    if match and match.group(2) in _LAYER_NAMES:
        return f"model.layers.{match.group(1)}.{_LAYER_NAMES[match.group(2)]}"
    raise CheckpointError(
        f"{source} has a tensor {name!r} that a llama GGUF file should not have; this loader does not "
        "understand it, and dropping it would load a different model"
    )
