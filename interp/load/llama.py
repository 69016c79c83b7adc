"""Llama-style checkpoints in Hugging Face layout: Llama, Mistral, Qwen2 and SmolLM (which is a Llama).

All share RMSNorm, rotary positions in the "rotate half" layout, grouped-query attention and a SiLU-gated MLP.
They differ in biases: Llama has none unless ``attention_bias`` (then on Q, K, V and O alike), and Qwen2 has
them on Q, K and V but not on the output projection, whose bias loads as zeros. Sliding-window attention is
exact for sequences no longer than the window, so such models load with ``n_ctx`` capped at the window.
Rotary scaling (``llama3``, ``yarn``, ``dynamic``...) changes every position and is refused, not ignored.
"""

from __future__ import annotations

from functools import partial

import torch
from einops import rearrange

from interp.config import TransformerConfig
from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

IGNORED = [r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq"]


def config(hf: HFConfig, tensors: TensorSource, *, qkv_bias_only: bool = False) -> TransformerConfig:
    """The :class:`TransformerConfig` of a Llama-style ``config.json``.

    Args:
        hf: the config.
        tensors: the weights (unused; the signature is the family table's).
        qkv_bias_only: Qwen2's layout: biases on Q, K and V, none on O.
    """
    d_model, n_heads = hf.require("hidden_size"), hf.require("num_attention_heads")
    n_ctx = hf.require("max_position_embeddings")
    if _sliding(hf) and hf.get("sliding_window") is not None:
        n_ctx = min(n_ctx, hf.get("sliding_window"))
    return TransformerConfig(
        n_layers=hf.require("num_hidden_layers"),
        d_model=d_model,
        n_heads=n_heads,
        d_head=hf.get("head_dim", d_model // n_heads),
        n_kv_heads=hf.get("num_key_value_heads", n_heads),
        d_mlp=hf.require("intermediate_size"),
        d_vocab=hf.require("vocab_size"),
        n_ctx=n_ctx,
        norm="rmsnorm",
        positional="rotary",
        rotary_base=float(_rope_theta(hf)),
        act=hf.activation("hidden_act"),
        mlp="gated",
        attn_bias=qkv_bias_only or bool(hf.get("attention_bias", False)),
        mlp_bias=bool(hf.get("mlp_bias", False)),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        eps=hf.get("rms_norm_eps", 1e-6),
        name=hf.get("_name_or_path") or None,
    )


qwen2_config = partial(config, qkv_bias_only=True)


def convert(tensors: TensorSource, cfg: TransformerConfig, hf: HFConfig) -> dict[str, torch.Tensor]:
    """Llama-style tensors -> HookedTransformer parameters (docs/PARAMS.md)."""
    d, h, g, e, m = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_mlp
    state = {
        "embed.W_E": tensors.take("model.embed_tokens.weight", (cfg.d_vocab, d), "vocab_size, hidden_size")
    }
    for layer in range(cfg.n_layers):
        src, dst = f"model.layers.{layer}.", f"blocks.{layer}."
        for name, heads in (("q", h), ("k", g), ("v", g)):
            key = src + f"self_attn.{name}_proj."
            what = f"{'num_attention_heads' if name == 'q' else 'num_key_value_heads'} * head_dim"
            w = tensors.take(key + "weight", (heads * e, d), f"{what}, hidden_size")
            state[dst + f"attn.W_{name.upper()}"] = rearrange(
                w, "(h e) d -> h d e", h=heads
            )  # [head, d_model, d_head]
            if cfg.attn_bias:
                b = tensors.take(key + "bias", (heads * e,), what)
                state[dst + f"attn.b_{name.upper()}"] = rearrange(
                    b, "(h e) -> h e", h=heads
                )  # [head, d_head]
        w_o = tensors.take(
            src + "self_attn.o_proj.weight", (d, h * e), "hidden_size, num_attention_heads * head_dim"
        )
        state[dst + "attn.W_O"] = rearrange(w_o, "d (h e) -> h e d", h=h)  # [head, d_head, d_model]
        if cfg.attn_bias:
            b_o = tensors.take_optional(src + "self_attn.o_proj.bias", (d,))
            state[dst + "attn.b_O"] = b_o if b_o is not None else torch.zeros(d)
        state[dst + "ln1.w"] = tensors.take(src + "input_layernorm.weight", (d,))
        state[dst + "ln2.w"] = tensors.take(src + "post_attention_layernorm.weight", (d,))
        for ours, theirs in (("W_gate", "gate_proj"), ("W_in", "up_proj")):
            state[dst + f"mlp.{ours}"] = tensors.take(
                src + f"mlp.{theirs}.weight", (m, d), "intermediate, hidden"
            ).T
            if cfg.mlp_bias:
                state[dst + f"mlp.b_{ours[2:]}"] = tensors.take(src + f"mlp.{theirs}.bias", (m,))
        state[dst + "mlp.W_out"] = tensors.take(
            src + "mlp.down_proj.weight", (d, m), "hidden, intermediate"
        ).T
        if cfg.mlp_bias:
            state[dst + "mlp.b_out"] = tensors.take(src + "mlp.down_proj.bias", (d,))
    state["ln_final.w"] = tensors.take("model.norm.weight", (d,))
    if cfg.tie_embeddings:
        tensors.take_optional("lm_head.weight", (cfg.d_vocab, d))  # a saved copy of the tied matrix
    else:
        state["unembed.W_U"] = tensors.take("lm_head.weight", (cfg.d_vocab, d), "vocab_size, hidden_size").T
    state["unembed.b_U"] = torch.zeros(cfg.d_vocab)
    tensors.finish(IGNORED)
    return state


def _rope_theta(hf: HFConfig) -> float:
    params = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling") or {}
    for origin in (params, scaling):
        kind = origin.get("rope_type", origin.get("type", "default"))
        if kind not in ("default", None):
            raise CheckpointError(
                f"{hf.source}: rotary scaling {kind!r} is not implemented; loading it as plain rotary would "
                "silently change every position. Supported: rope_type 'default'"
            )
    if params.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) != 1.0:
        raise CheckpointError(f"{hf.source}: partial_rotary_factor other than 1.0 is not supported")
    return params.get("rope_theta", hf.get("rope_theta", 10000.0))


def _sliding(hf: HFConfig) -> bool:
    if hf.model_type == "qwen2":
        return bool(hf.get("use_sliding_window", False)) or "sliding_attention" in hf.get("layer_types", [])
    return hf.get("sliding_window") is not None
