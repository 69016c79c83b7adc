"""BERT checkpoints (``model_type: bert``) in Hugging Face layout, with or without the masked-LM head.

BERT is post-norm (``LayerNorm(x + SubLayer(x))``), bidirectional, and normalises its summed embeddings. It
also adds a token-type embedding; every text here is a single segment (type 0), so that vector is folded into
the positional embedding. Linear weights are ``[out, in]`` and are transposed to our ``x @ W`` layout.
Checkpoints from ``BertForMaskedLM`` prefix the encoder with ``bert.`` and carry ``cls.predictions``; plain
``BertModel`` checkpoints have neither, and load with ``lm_head="none"`` (the model returns the final stream).
"""

from __future__ import annotations

import torch
from einops import rearrange

from interp.config import TransformerConfig
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

# Buffers, the sentence-level pooler and the next-sentence head: not part of the token-level model.
IGNORED = [
    r"embeddings\.position_ids",
    r"pooler\.dense\.(weight|bias)",
    r"cls\.seq_relationship\.(weight|bias)",
]
_MLM = "cls.predictions.transform.dense.weight"


def config(hf: HFConfig, tensors: TensorSource) -> TransformerConfig:
    """The :class:`TransformerConfig` of a BERT ``config.json``; ``lm_head="mlm"`` if the weights have one."""
    hf.expect("position_embedding_type", ["absolute"], "absolute", "relative position embeddings")
    hf.expect("is_decoder", [False], False, "BERT as a causal decoder")
    hf.expect("add_cross_attention", [False], False, "cross-attention is for encoder-decoder models")
    mlm = _MLM in tensors
    untied = "cls.predictions.decoder.weight" in tensors and not hf.get("tie_word_embeddings", True)
    return TransformerConfig(
        n_layers=hf.require("num_hidden_layers"),
        d_model=hf.require("hidden_size"),
        n_heads=hf.require("num_attention_heads"),
        d_mlp=hf.require("intermediate_size"),
        d_vocab=hf.require("vocab_size"),
        n_ctx=hf.require("max_position_embeddings"),
        norm="layernorm",
        norm_placement="post",
        positional="learned",
        act=hf.activation("hidden_act"),
        causal=False,
        eps=hf.get("layer_norm_eps", 1e-12),
        embed_norm=True,
        lm_head="mlm" if mlm else "none",
        tie_embeddings=mlm and not untied,
        name=hf.get("_name_or_path") or None,
    )


def convert(tensors: TensorSource, cfg: TransformerConfig, hf: HFConfig) -> dict[str, torch.Tensor]:
    """BERT tensors -> HookedTransformer parameters (docs/PARAMS.md)."""
    tensors.strip_prefix("bert.")
    tensors.rename(r"LayerNorm\.gamma$", "LayerNorm.weight")  # checkpoints converted from TensorFlow
    tensors.rename(r"LayerNorm\.beta$", "LayerNorm.bias")
    d, h, m = cfg.d_model, cfg.n_heads, cfg.d_mlp
    types = hf.get("type_vocab_size", 2)
    token_type = tensors.take(
        "embeddings.token_type_embeddings.weight", (types, d), "type_vocab_size, hidden"
    )
    position = tensors.take(
        "embeddings.position_embeddings.weight", (cfg.n_ctx, d), "max_position_embeddings, hidden"
    )
    state = {
        "embed.W_E": tensors.take(
            "embeddings.word_embeddings.weight", (cfg.d_vocab, d), "vocab_size, hidden"
        ),
        # the one sum a converter computes: in float32, rounded once to the dtype the model is loaded in
        "pos_embed.W_pos": position.float() + token_type[0].float(),
    }
    state.update(_layernorm(tensors, "embeddings.LayerNorm", "embed_ln", d))
    for layer in range(cfg.n_layers):
        src, dst = f"encoder.layer.{layer}.", f"blocks.{layer}."
        for name, theirs in (("Q", "query"), ("K", "key"), ("V", "value")):
            w = tensors.take(src + f"attention.self.{theirs}.weight", (d, d), "hidden, hidden")
            b = tensors.take(src + f"attention.self.{theirs}.bias", (d,))
            state[dst + f"attn.W_{name}"] = rearrange(w, "(h e) d -> h d e", h=h)  # [head, d_model, d_head]
            state[dst + f"attn.b_{name}"] = rearrange(b, "(h e) -> h e", h=h)  # [head, d_head]
        w_o = tensors.take(src + "attention.output.dense.weight", (d, d), "hidden, hidden")
        state[dst + "attn.W_O"] = rearrange(w_o, "d (h e) -> h e d", h=h)  # [head, d_head, d_model]
        state[dst + "attn.b_O"] = tensors.take(src + "attention.output.dense.bias", (d,))
        state.update(_layernorm(tensors, src + "attention.output.LayerNorm", dst + "ln1", d))
        state[dst + "mlp.W_in"] = tensors.take(
            src + "intermediate.dense.weight", (m, d), "intermediate, hidden"
        ).T
        state[dst + "mlp.b_in"] = tensors.take(src + "intermediate.dense.bias", (m,))
        state[dst + "mlp.W_out"] = tensors.take(src + "output.dense.weight", (d, m), "hidden, intermediate").T
        state[dst + "mlp.b_out"] = tensors.take(src + "output.dense.bias", (d,))
        state.update(_layernorm(tensors, src + "output.LayerNorm", dst + "ln2", d))
    if cfg.lm_head == "mlm":
        state.update(_mlm_head(tensors, cfg))
    tensors.finish(IGNORED)
    return state


def _mlm_head(tensors: TensorSource, cfg: TransformerConfig) -> dict[str, torch.Tensor]:
    d, v = cfg.d_model, cfg.d_vocab
    state = {
        "head.W": tensors.take("cls.predictions.transform.dense.weight", (d, d), "hidden, hidden").T,
        "head.b": tensors.take("cls.predictions.transform.dense.bias", (d,)),
    }
    state.update(_layernorm(tensors, "cls.predictions.transform.LayerNorm", "head.ln", d))
    decoder = tensors.take_optional("cls.predictions.decoder.weight", (v, d), "vocab_size, hidden")
    if not cfg.tie_embeddings:
        state["unembed.W_U"] = decoder.T
    bias = tensors.take_optional("cls.predictions.bias", (v,), "vocab_size")
    decoder_bias = tensors.take_optional("cls.predictions.decoder.bias", (v,), "vocab_size")
    state["unembed.b_U"] = next((b for b in (bias, decoder_bias) if b is not None), torch.zeros(v))
    return state


def _layernorm(tensors: TensorSource, src: str, dst: str, d: int) -> dict[str, torch.Tensor]:
    return {dst + ".w": tensors.take(src + ".weight", (d,)), dst + ".b": tensors.take(src + ".bias", (d,))}
