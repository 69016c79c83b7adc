"""GPT-NeoX checkpoints (``gpt_neox``): Pythia, GPT-NeoX-20B and their fine-tunes.

Attention and MLP run in parallel off the block's input, ``x + Attn(LN1 x) + MLP(LN2 x)``, when
``use_parallel_residual`` (every Pythia); otherwise the block is an ordinary pre-norm one. Only the first
``rotary_pct`` of each head rotates (a quarter in Pythia), in the "rotate half" layout over those
dimensions. ``query_key_value`` is fused per head: the rows of head ``i`` are its query, key and value,
``d_head`` rows each, one head after another (not all queries first). LayerNorms have biases, every
projection has a bias, and the unembedding (``embed_out``, ``lm_head`` when saved by newer ``transformers``)
is not tied.
"""

from __future__ import annotations

import torch
from einops import rearrange

from interp.config import TransformerConfig
from interp.load import llama
from interp.load.hf_config import HFConfig
from interp.load.rope import read_rotary, rotary_dim, scaled_context
from interp.load.tensors import TensorSource

IGNORED = [
    r"gpt_neox\.layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)",  # buffers older files saved
]


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    d_model, n_heads = hf.require("hidden_size"), hf.require("num_attention_heads")
    d_head = d_model // n_heads
    rotary = read_rotary(hf, default_fraction=0.25)
    return TransformerConfig(
        n_layers=hf.require("num_hidden_layers"),
        d_model=d_model,
        n_heads=n_heads,
        d_mlp=hf.require("intermediate_size"),
        d_vocab=hf.require("vocab_size"),
        n_ctx=scaled_context(hf, rotary.scaling),
        norm="layernorm",
        parallel_attn_mlp=bool(hf.get("use_parallel_residual", True)),
        positional="rotary",
        rotary_base=rotary.base,
        rotary_dim=rotary_dim(rotary, d_head, hf.source),
        rotary_scaling=rotary.scaling,
        act=hf.activation("hidden_act"),
        attn_bias=bool(hf.get("attention_bias", True)),
        mlp_bias=True,
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        eps=hf.get("layer_norm_eps", 1e-5),
        name=hf.get("_name_or_path") or None,
    )


def convert(tensors: TensorSource, cfg: TransformerConfig, hf: HFConfig) -> dict[str, torch.Tensor]:
    """GPT-NeoX tensors -> HookedTransformer parameters (docs/PARAMS.md)."""
    d, h, m = cfg.d_model, cfg.n_heads, cfg.d_mlp
    state = {
        "embed.W_E": tensors.take("gpt_neox.embed_in.weight", (cfg.d_vocab, d), "vocab_size, hidden_size")
    }
    for layer in range(cfg.n_layers):
        src, dst = f"gpt_neox.layers.{layer}.", f"blocks.{layer}."
        for ours, theirs in (("ln1", "input_layernorm"), ("ln2", "post_attention_layernorm")):
            state[dst + f"{ours}.w"] = tensors.take(src + f"{theirs}.weight", (d,))
            state[dst + f"{ours}.b"] = tensors.take(src + f"{theirs}.bias", (d,))
        qkv = tensors.take(
            src + "attention.query_key_value.weight", (3 * d, d), "3 * hidden_size, hidden_size"
        )
        per_head = rearrange(qkv, "(h three e) d -> three h d e", h=h, three=3)  # [3, head, d_model, d_head]
        for i, name in enumerate("QKV"):
            state[dst + f"attn.W_{name}"] = per_head[i]
        w_o = tensors.take(src + "attention.dense.weight", (d, d), "hidden_size, hidden_size")
        state[dst + "attn.W_O"] = rearrange(w_o, "d (h e) -> h e d", h=h)  # [head, d_head, d_model]
        if cfg.attn_bias:
            b = tensors.take(src + "attention.query_key_value.bias", (3 * d,), "3 * hidden_size")
            b = rearrange(b, "(h three e) -> three h e", h=h, three=3)  # [3, head, d_head]
            for i, name in enumerate("QKV"):
                state[dst + f"attn.b_{name}"] = b[i]
            state[dst + "attn.b_O"] = tensors.take(src + "attention.dense.bias", (d,))
        w_in = tensors.take(src + "mlp.dense_h_to_4h.weight", (m, d), "intermediate_size, hidden_size")
        state[dst + "mlp.W_in"] = w_in.T
        state[dst + "mlp.b_in"] = tensors.take(src + "mlp.dense_h_to_4h.bias", (m,))
        w_out = tensors.take(src + "mlp.dense_4h_to_h.weight", (d, m), "hidden_size, intermediate_size")
        state[dst + "mlp.W_out"] = w_out.T
        state[dst + "mlp.b_out"] = tensors.take(src + "mlp.dense_4h_to_h.bias", (d,))
    state["ln_final.w"] = tensors.take("gpt_neox.final_layer_norm.weight", (d,))
    state["ln_final.b"] = tensors.take("gpt_neox.final_layer_norm.bias", (d,))
    head = "lm_head.weight" if "lm_head.weight" in tensors else "embed_out.weight"
    state.update(llama.unembedding(tensors, cfg, head))
    tensors.finish(IGNORED)
    return state
