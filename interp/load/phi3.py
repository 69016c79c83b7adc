"""Phi-3 checkpoints (``phi3``): the Llama layout with fused projections.

``qkv_proj`` stacks the query, key and value rows (``[Q; K; V]``, the key and value blocks
``num_key_value_heads * head_dim`` rows each) and ``gate_up_proj`` the gate rows before the up rows. They are
split into the Llama names and converted as a Llama. A ``sliding_window`` applies to every layer, as in
``transformers``; the long-context variants use ``longrope`` rotary scaling, and Phi-4-mini's
``partial_rotary_factor`` rotates part of each head.
"""

from __future__ import annotations

import re

import torch

from interp.config import TransformerConfig
from interp.load import llama
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    return llama.config(hf, tensors)


def convert(tensors: TensorSource, cfg: TransformerConfig, hf: HFConfig) -> dict[str, torch.Tensor]:
    """Split the fused projections into the Llama names, then convert as a Llama."""
    d, h, g, e, m = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_mlp
    for name in tensors.names():
        match = re.fullmatch(r"(model\.layers\.\d+\.)(self_attn\.qkv_proj|mlp\.gate_up_proj)\.weight", name)
        if match is None:
            continue
        prefix, which = match.groups()
        if which == "self_attn.qkv_proj":
            meaning = "(num_attention_heads + 2 * num_key_value_heads) * head_dim, hidden_size"
            w = tensors.take(name, ((h + 2 * g) * e, d), meaning)
            q, k, v = w.split([h * e, g * e, g * e])
            for piece, t in zip("qkv", (q, k, v), strict=True):
                tensors.put(prefix + f"self_attn.{piece}_proj.weight", t)
        else:
            w = tensors.take(name, (2 * m, d), "2 * intermediate_size, hidden_size")
            gate, up = w.chunk(2)
            tensors.put(prefix + "mlp.gate_proj.weight", gate)
            tensors.put(prefix + "mlp.up_proj.weight", up)
    return llama.convert(tensors, cfg, hf)
