"""GPT-2 checkpoints (``model_type: gpt2``) in Hugging Face layout.

GPT-2 stores its projections as ``Conv1D`` weights, already ``[in, out]`` like ours; Q, K and V are fused
into one ``c_attn`` matrix whose columns are ``(q | k | v)``, each ``(head, d_head)``. The unembedding is
tied to the token embedding unless the config says otherwise.
"""

from __future__ import annotations

import torch
from einops import rearrange

from interp.config import TransformerConfig
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

IGNORED = [r"h\.\d+\.attn\.(bias|masked_bias)"]  # causal-mask buffers of old checkpoints


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    """The :class:`TransformerConfig` of a GPT-2 ``config.json``."""
    hf.expect("scale_attn_weights", [True], True, "GPT-2 without the 1/sqrt(d_head) scale")
    hf.expect("scale_attn_by_inverse_layer_idx", [False], False, "per-layer attention scaling")
    hf.expect("add_cross_attention", [False], False, "cross-attention is for encoder-decoder models")
    d_model = hf.require("n_embd")
    return TransformerConfig(
        n_layers=hf.require("n_layer"),
        d_model=d_model,
        n_heads=hf.require("n_head"),
        d_mlp=hf.get("n_inner", 4 * d_model),
        d_vocab=hf.require("vocab_size"),
        n_ctx=hf.require("n_positions"),
        norm="layernorm",
        positional="learned",
        act=hf.activation("activation_function"),
        eps=hf.get("layer_norm_epsilon", 1e-5),
        tie_embeddings=hf.get("tie_word_embeddings", True),
        name=hf.get("_name_or_path") or None,
    )


def convert(tensors: TensorSource, cfg: TransformerConfig, hf: HFConfig) -> dict[str, torch.Tensor]:
    """GPT-2 tensors -> HookedTransformer parameters (docs/PARAMS.md)."""
    tensors.strip_prefix("transformer.")
    d, h, m = cfg.d_model, cfg.n_heads, cfg.d_mlp
    state = {
        "embed.W_E": tensors.take("wte.weight", (cfg.d_vocab, d), "vocab_size, n_embd"),
        "pos_embed.W_pos": tensors.take("wpe.weight", (cfg.n_ctx, d), "n_positions, n_embd"),
    }
    for layer in range(cfg.n_layers):
        src, dst = f"h.{layer}.", f"blocks.{layer}."
        qkv = tensors.take(src + "attn.c_attn.weight", (d, 3 * d), "n_embd, 3 * n_embd")
        qkv_bias = tensors.take(src + "attn.c_attn.bias", (3 * d,), "3 * n_embd")
        for name, w, b in zip("QKV", qkv.chunk(3, dim=1), qkv_bias.chunk(3), strict=True):
            state[dst + f"attn.W_{name}"] = rearrange(w, "d (h e) -> h d e", h=h)  # [head, d_model, d_head]
            state[dst + f"attn.b_{name}"] = rearrange(b, "(h e) -> h e", h=h)  # [head, d_head]
        w_o = tensors.take(src + "attn.c_proj.weight", (d, d), "n_embd, n_embd")
        state[dst + "attn.W_O"] = rearrange(w_o, "(h e) d -> h e d", h=h)  # [head, d_head, d_model]
        state[dst + "attn.b_O"] = tensors.take(src + "attn.c_proj.bias", (d,))
        for ours, theirs in (("ln1", "ln_1"), ("ln2", "ln_2")):
            state[dst + f"{ours}.w"] = tensors.take(src + f"{theirs}.weight", (d,))
            state[dst + f"{ours}.b"] = tensors.take(src + f"{theirs}.bias", (d,))
        state[dst + "mlp.W_in"] = tensors.take(src + "mlp.c_fc.weight", (d, m), "n_embd, n_inner")
        state[dst + "mlp.b_in"] = tensors.take(src + "mlp.c_fc.bias", (m,), "n_inner")
        state[dst + "mlp.W_out"] = tensors.take(src + "mlp.c_proj.weight", (m, d), "n_inner, n_embd")
        state[dst + "mlp.b_out"] = tensors.take(src + "mlp.c_proj.bias", (d,))
    state["ln_final.w"] = tensors.take("ln_f.weight", (d,))
    state["ln_final.b"] = tensors.take("ln_f.bias", (d,))
    if cfg.tie_embeddings:
        tensors.take_optional("lm_head.weight", (cfg.d_vocab, d))  # a saved copy of the tied matrix
    else:
        state["unembed.W_U"] = tensors.take("lm_head.weight", (cfg.d_vocab, d), "vocab_size, n_embd").T
    state["unembed.b_U"] = torch.zeros(cfg.d_vocab)
    tensors.finish(IGNORED)
    return state
