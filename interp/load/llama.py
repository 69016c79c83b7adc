"""Llama-layout checkpoints: Llama (with Llama 3 rotary scaling), Mistral, Qwen2/2.5, Qwen3 and SmolLM.

All share RMSNorm, rotary positions in the "rotate half" layout, grouped-query attention, a gated MLP and the
tensor names ``model.layers.N.self_attn.{q,k,v,o}_proj``, ``mlp.{gate,up,down}_proj``. They differ in
biases (Llama has none unless ``attention_bias``, then on Q, K, V and O alike; Qwen2 has them on Q, K and V
only, and its output bias loads as zeros), in Qwen3's per-head q/k RMSNorm, and in sliding windows: every
layer of a Mistral whose ``sliding_window`` is set, the layers ``layer_types`` names (or from
``max_window_layers`` on) of a Qwen2/Qwen3 with ``use_sliding_window``. A window is a mask, never a shorter
context. Gemma, OLMo 2 and Phi-3 reuse :func:`convert` with their own norm names (``NORMS``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from einops import rearrange

from interp.config import LayerType, TransformerConfig
from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig
from interp.load.rope import read_rotary, rotary_dim, scaled_context
from interp.load.tensors import TensorSource

IGNORED = [r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq"]

# Checkpoint norm names per norm_placement: ours -> theirs (within model.layers.N.).
NORMS = {
    "pre": {"ln1": "input_layernorm", "ln2": "post_attention_layernorm"},
    "sandwich": {
        "ln1": "input_layernorm",
        "ln1_post": "post_attention_layernorm",
        "ln2": "pre_feedforward_layernorm",
        "ln2_post": "post_feedforward_layernorm",
    },
    "output": {"ln1_post": "post_attention_layernorm", "ln2_post": "post_feedforward_layernorm"},
}


def config(
    hf: HFConfig, tensors: TensorSource, *, qkv_bias_only: bool = False, **overrides: Any
) -> TransformerConfig:
    """The :class:`TransformerConfig` of a Llama-layout ``config.json``.

    Args:
        hf: the config.
        tensors: the weights (unused; the signature is the family table's).
        qkv_bias_only: Qwen2's layout: biases on Q, K and V, none on O.
        overrides: fields a family sets differently (Qwen3's ``qk_norm``, Gemma's norms...).
    """
    d_model, n_heads = hf.require("hidden_size"), hf.require("num_attention_heads")
    d_head = hf.get("head_dim", d_model // n_heads)
    rotary = read_rotary(hf)
    types = layer_types(hf)
    fields = dict(
        n_layers=hf.require("num_hidden_layers"),
        d_model=d_model,
        n_heads=n_heads,
        d_head=d_head,
        n_kv_heads=hf.get("num_key_value_heads", n_heads),
        d_mlp=hf.require("intermediate_size"),
        d_vocab=hf.require("vocab_size"),
        n_ctx=scaled_context(hf, rotary.scaling),
        norm="rmsnorm",
        positional="rotary",
        rotary_base=rotary.base,
        rotary_dim=rotary_dim(rotary, d_head, hf.source),
        rotary_scaling=rotary.scaling,
        act=overrides.pop("act") if "act" in overrides else hf.activation("hidden_act"),
        mlp="gated",
        attn_bias=qkv_bias_only or bool(hf.get("attention_bias", False)),
        mlp_bias=bool(hf.get("mlp_bias", False)),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        eps=hf.get("rms_norm_eps", 1e-6),
        sliding_window=hf.get("sliding_window") if "sliding" in types else None,
        layer_types=types,
        name=hf.get("_name_or_path") or None,
    )
    fields.update(overrides)
    return TransformerConfig(**fields)


qwen2_config = partial(config, qkv_bias_only=True)
qwen3_config = partial(config, qk_norm="head")


def layer_types(hf: HFConfig) -> tuple[LayerType, ...]:
    """``"full"`` or ``"sliding"`` per layer, as ``transformers`` decides it for this family."""
    n = hf.require("num_hidden_layers")
    given = hf.get("layer_types")
    if hf.model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        if not hf.get("use_sliding_window", False) or hf.get("sliding_window") is None:
            return ("full",) * n
        if given is None:
            first = hf.get("max_window_layers", n)
            return tuple("sliding" if i >= first else "full" for i in range(n))
    elif given is None:  # Mistral, Phi-3: every layer, when a window is set
        return ("sliding" if hf.get("sliding_window") is not None else "full",) * n
    names = {"full_attention": "full", "sliding_attention": "sliding"}
    if len(given) != n or any(t not in names for t in given):
        raise CheckpointError(
            f"{hf.source}: layer_types must name 'full_attention' or 'sliding_attention' for each of "
            f"the {n} layers, got {given}"
        )
    types = tuple(names[t] for t in given)
    if "sliding" in types and hf.get("sliding_window") is None:
        raise CheckpointError(f"{hf.source}: layer_types has sliding layers but sliding_window is not set")
    return types


MoEReader = Callable[[TensorSource, TransformerConfig, str, str], dict[str, torch.Tensor]]


def convert(
    tensors: TensorSource, cfg: TransformerConfig, hf: HFConfig, *, moe: MoEReader | None = None
) -> dict[str, torch.Tensor]:
    """Llama-layout tensors -> HookedTransformer parameters (docs/PARAMS.md).

    Args:
        tensors, cfg, hf: the checkpoint's tensors, its config and ``config.json``.
        moe: for mixture-of-experts families, ``(tensors, cfg, layer prefix, our prefix) -> parameters`` of a
            layer whose ``cfg.mlp_types`` entry is ``"moe"`` (:mod:`interp.load.experts`).
    """
    d = cfg.d_model
    state = {
        "embed.W_E": tensors.take("model.embed_tokens.weight", (cfg.d_vocab, d), "vocab_size, hidden_size")
    }
    for layer in range(cfg.n_layers):
        src, dst = f"model.layers.{layer}.", f"blocks.{layer}."
        state.update(_attention(tensors, cfg, src + "self_attn.", dst + "attn."))
        for ours, theirs in NORMS[cfg.norm_placement].items():
            state[dst + f"{ours}.w"] = tensors.take(src + f"{theirs}.weight", (d,), "hidden_size")
        if cfg.mlp_types[layer] == "moe":
            state.update(moe(tensors, cfg, src, dst + "mlp."))
        else:
            state.update(dense_mlp(tensors, cfg, src + "mlp.", dst + "mlp.", cfg.d_mlp, "intermediate_size"))
    state["ln_final.w"] = tensors.take("model.norm.weight", (d,))
    state.update(unembedding(tensors, cfg, "lm_head.weight"))
    tensors.finish(IGNORED)
    return state


def dense_mlp(
    tensors: TensorSource, cfg: TransformerConfig, src: str, dst: str, width: int, meaning: str
) -> dict[str, torch.Tensor]:
    """A gated MLP's ``{gate,up,down}_proj`` under ``src`` -> ``W_gate``, ``W_in``, ``W_out`` under ``dst``.

    Args:
        width: its hidden width; ``meaning``: the config key that gives it, for errors.
    """
    d = cfg.d_model
    state = {}
    for ours, theirs in (("W_gate", "gate_proj"), ("W_in", "up_proj")):
        state[dst + ours] = tensors.take(src + f"{theirs}.weight", (width, d), f"{meaning}, hidden_size").T
        if cfg.mlp_bias:
            state[dst + f"b_{ours[2:]}"] = tensors.take(src + f"{theirs}.bias", (width,))
    state[dst + "W_out"] = tensors.take(src + "down_proj.weight", (d, width), f"hidden_size, {meaning}").T
    if cfg.mlp_bias:
        state[dst + "b_out"] = tensors.take(src + "down_proj.bias", (d,))
    return state


def _attention(tensors: TensorSource, cfg: TransformerConfig, src: str, dst: str) -> dict[str, torch.Tensor]:
    d, h, g, e = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    state: dict[str, torch.Tensor] = {}
    for name, heads in (("q", h), ("k", g), ("v", g)):
        key = src + f"{name}_proj."
        what = f"{'num_attention_heads' if name == 'q' else 'num_key_value_heads'} * head_dim"
        w = tensors.take(key + "weight", (heads * e, d), f"{what}, hidden_size")
        state[dst + f"W_{name.upper()}"] = rearrange(
            w, "(h e) d -> h d e", h=heads
        )  # [head, d_model, d_head]
        if cfg.attn_bias:
            b = tensors.take(key + "bias", (heads * e,), what)
            state[dst + f"b_{name.upper()}"] = rearrange(b, "(h e) -> h e", h=heads)  # [head, d_head]
    w_o = tensors.take(src + "o_proj.weight", (d, h * e), "hidden_size, num_attention_heads * head_dim")
    state[dst + "W_O"] = rearrange(w_o, "d (h e) -> h e d", h=h)  # [head, d_head, d_model]
    if cfg.attn_bias:
        b_o = tensors.take_optional(src + "o_proj.bias", (d,))
        state[dst + "b_O"] = b_o if b_o is not None else torch.zeros(d)
    if cfg.attn_sinks:
        state[dst + "sinks"] = tensors.take(src + "sinks", (h,), "num_attention_heads")
    if cfg.qk_norm != "none":
        per_head = cfg.qk_norm == "head"
        for name, heads in (("q", h), ("k", g)):
            width = e if per_head else heads * e
            heads_key = "num_attention_heads" if name == "q" else "num_key_value_heads"
            meaning = "head_dim" if per_head else f"{heads_key} * head_dim"
            state[dst + f"{name}_norm.w"] = tensors.take(src + f"{name}_norm.weight", (width,), meaning)
    return state


def unembedding(tensors: TensorSource, cfg: TransformerConfig, name: str) -> dict[str, torch.Tensor]:
    """``unembed.W_U`` (unless tied; a saved copy of the tied matrix is accepted) and zero ``unembed.b_U``."""
    d = cfg.d_model
    state = {"unembed.b_U": torch.zeros(cfg.d_vocab)}
    if cfg.tie_embeddings:
        tensors.take_optional(name, (cfg.d_vocab, d))  # a saved copy of the tied matrix
    else:
        state["unembed.W_U"] = tensors.take(name, (cfg.d_vocab, d), "vocab_size, hidden_size").T
    return state
