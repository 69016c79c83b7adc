"""Gemma 1, 2 and 3 checkpoints (``gemma``, ``gemma2``, ``gemma3_text``, and the text model of ``gemma3``).

What the three share, on top of the Llama layout: RMSNorms that multiply by ``1 + w`` in float32, embeddings
scaled by ``sqrt(d_model)``, a gated GELU-tanh MLP, an explicit ``head_dim`` and tied embeddings. Gemma 2 adds
a norm on each sublayer's output before the residual add (the "sandwich": ``pre_feedforward_layernorm`` and
``post_feedforward_layernorm`` beside ``input_layernorm`` and ``post_attention_layernorm``, which in Gemma 2 is
the attention output's norm, not the MLP's input norm as in Llama), tanh soft-capping of the attention scores
and of the final logits, the query scale ``query_pre_attn_scalar ** -0.5`` and sliding-window attention on
alternate layers, the first one sliding. Gemma 3 adds per-head q/k RMSNorm before rotary, five sliding layers
per global one, and a second rotary base for the sliding layers; it drops soft-capping by default.

Layer types follow ``layer_types`` when the config has it and otherwise the pattern ``transformers`` derives
(Gemma 2: even layers slide; Gemma 3: every ``sliding_window_pattern``-th layer is global).
"""

from __future__ import annotations

import math

import torch

from interp.config import LayerType, TransformerConfig
from interp.load import llama
from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig
from interp.load.rope import read_rotary, rotary_dim
from interp.load.tensors import TensorSource

_ACT_KEYS = ("hidden_activation", "hidden_act")


def gemma_config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    """Gemma 1: the Llama layout with Gemma's norms, embedding scale and activation."""
    return llama.config(hf, tensors, **_shared(hf), tie_embeddings=bool(hf.get("tie_word_embeddings", True)))


def gemma2_config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    """Gemma 2: sandwich norms, soft-capping, the query scale and alternating sliding windows."""
    return llama.config(
        hf,
        tensors,
        **_shared(hf),
        tie_embeddings=bool(hf.get("tie_word_embeddings", True)),
        norm_placement="sandwich",
        attn_scale=math.sqrt(hf.get("query_pre_attn_scalar", 256)),
        attn_softcap=hf.get("attn_logit_softcapping"),
        logit_softcap=hf.get("final_logit_softcapping"),
        sliding_window=hf.get("sliding_window", 4096),
        layer_types=_layer_types(hf, period=2),
    )


def gemma3_config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    """Gemma 3: Gemma 2 plus q/k norms, five sliding layers per global one and a local rotary base."""
    if hf.get("use_bidirectional_attention", False):
        raise CheckpointError(
            f"{hf.source}: use_bidirectional_attention=True (an encoder variant) is not supported; "
            "supported: the causal Gemma 3 text model"
        )
    full = read_rotary(hf, "full_attention", default_base=1_000_000.0)
    local = read_rotary(hf, "sliding_attention", default_base=10_000.0)
    if local.scaling is not None:
        raise CheckpointError(f"{hf.source}: rotary scaling on Gemma 3's sliding layers is not supported")
    if local.fraction != full.fraction:
        raise CheckpointError(f"{hf.source}: different rotary fractions per layer type are not supported")
    types = _layer_types(hf, period=hf.get("sliding_window_pattern", 6))
    d_head = hf.get("head_dim", hf.require("hidden_size") // hf.require("num_attention_heads"))
    return llama.config(
        hf,
        tensors,
        **_shared(hf),
        tie_embeddings=bool(hf.get("tie_word_embeddings", True)),
        norm_placement="sandwich",
        qk_norm="head",
        attn_scale=math.sqrt(hf.get("query_pre_attn_scalar", 256)),
        attn_softcap=hf.get("attn_logit_softcapping"),
        logit_softcap=hf.get("final_logit_softcapping"),
        sliding_window=hf.get("sliding_window", 4096) if "sliding" in types else None,
        layer_types=types,
        rotary_base=full.base,
        rotary_dim=rotary_dim(full, d_head, hf.source),
        rotary_scaling=full.scaling,
        local_rotary_base=local.base if "sliding" in types else None,
    )


def convert(tensors: TensorSource, cfg: TransformerConfig, hf: HFConfig) -> dict[str, torch.Tensor]:
    """Gemma tensors use the Llama names (plus the sandwich norms and q/k norms the config asks for)."""
    return llama.convert(tensors, cfg, hf)


def multimodal_text(hf: HFConfig, tensors: TensorSource) -> tuple[HFConfig, TensorSource]:
    """The text model of a ``gemma3`` (image and text) checkpoint: its ``text_config`` and language-model
    tensors under the text model's names; the vision tower and projector are not part of it."""
    text = hf.get("text_config")
    if not isinstance(text, dict):
        raise CheckpointError(f"{hf.source}: a gemma3 config needs a 'text_config' object")
    values = {"model_type": "gemma3_text", **text}
    for key in ("tie_word_embeddings", "_name_or_path"):
        if key not in values and key in hf.values:
            values[key] = hf.values[key]
    for old, new in (
        (r"^(?:model\.)?language_model\.model\.", "model."),  # transformers 4 layout
        (r"^model\.language_model\.", "model."),  # transformers 5 layout
        (r"^language_model\.lm_head\.", "lm_head."),
    ):
        tensors.rename(old, new)
    tensors.discard(
        ("vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.")
    )
    return HFConfig(values, hf.source), tensors


def _shared(hf: HFConfig) -> dict:
    d_model = hf.require("hidden_size")
    return dict(
        act=_activation(hf),
        norm_offset=1.0,
        norm_gain_in_float32=True,
        embed_scale=math.sqrt(d_model),
    )


def _activation(hf: HFConfig):
    for key in _ACT_KEYS:
        name = hf.get(key)
        if name is not None:
            # Gemma 1's releases say "gelu" but mean the tanh approximation (as transformers reads it).
            return "gelu_tanh" if name == "gelu" else hf.activation(key)
    return "gelu_tanh"


def _layer_types(hf: HFConfig, period: int) -> tuple[LayerType, ...]:
    """Gemma's layer types: ``layer_types`` when given, else every ``period``-th layer global."""
    n = hf.require("num_hidden_layers")
    if hf.get("layer_types") is not None:
        return llama.layer_types(hf)
    return tuple("sliding" if (i + 1) % period else "full" for i in range(n))
