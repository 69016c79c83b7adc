"""The GGUF architectures llama.cpp writes for the families this loader reads, one record each.

Each :class:`~interp.load.gguf_hf.GGUFArchitecture` names its family, its tensors and what its metadata adds to
the ``config.json`` keys all architectures share (:mod:`interp.load.gguf_hf`). Where a file leaves a setting
to the runtime, it is filled in as llama.cpp fills it, which is the checkpoint's own value for the released
models:

- Gemma 2 and 3 store no ``query_pre_attn_scalar``: llama.cpp scales queries by ``head_dim ** -0.5``, and by
  ``(d_model / n_heads) ** -0.5`` for the 27B models (46 and 62 layers), as their configs say;
- Gemma 2's soft-caps and window default to 50, 30 and 4096; its even layers slide, and Gemma 3 has five
  sliding layers per global one (unless the file has ``attention.sliding_window_pattern``), its sliding layers
  on a rotary base of 10000 unless ``rope.freq_base_swa`` says otherwise;
- GPT-NeoX files store no activation: Pythia's exact GELU (llama.cpp computes a tanh approximation of it).

- GPT-OSS files store neither the experts' clamp nor their sigmoid gain (llama.cpp fixes them at 7 and 1.702,
  the released models' values), nor whether YaRN rounds its ramp's bounds: the released config says it does
  not (``truncate: false``), and so it loads; their even layers slide;
- mixture-of-experts files say nothing of whether the chosen experts' weights are renormalised (unless they
  have ``expert_weights_norm``): llama.cpp renormalises them for Mixtral (``llama`` with experts) and Qwen3-MoE
  and not for Qwen2-MoE and OLMoE, as their released models do.

Settings that a GGUF file of these architectures cannot carry load as llama.cpp runs them: a Qwen2 sliding
window is not stored (llama.cpp attends to the whole context; Qwen2.5 models do too), and Phi-3's window is
applied as ``transformers`` applies it (llama.cpp currently ignores it).
"""

from __future__ import annotations

from typing import Any

from interp.load.errors import CheckpointError
from interp.load.gguf_hf import GGUFArchitecture
from interp.load.gguf_metadata import Metadata, sliding_layers

# Llama-layout names (within blk.N. / model.layers.N.), and the globals.
_LLAMA = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_QK_NORM = {"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
_SANDWICH = {  # Gemma 2/3: ffn_norm is the MLP's input norm; the attention output has its own
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}


# Mixture-of-experts layers: the router, the stacked experts, Qwen2-MoE's shared expert and its gate.
_EXPERTS = {
    "ffn_gate_inp": "mlp.gate",
    "ffn_gate_exps": "mlp.experts.gate_proj",
    "ffn_up_exps": "mlp.experts.up_proj",
    "ffn_down_exps": "mlp.experts.down_proj",
}
_SHARED_EXPERT = {
    "ffn_gate_inp_shexp": "mlp.shared_expert_gate",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
}
_MIXTRAL_EXPERTS = {  # in the llama architecture, under Mixtral's own names
    "ffn_gate_inp": "block_sparse_moe.gate",
    "ffn_gate_exps": "block_sparse_moe.experts.w1",
    "ffn_up_exps": "block_sparse_moe.experts.w3",
    "ffn_down_exps": "block_sparse_moe.experts.w2",
}


def _routing(meta: Metadata, experts_key: str, renormalize: bool) -> dict[str, Any]:
    """The routing keys of ``config.json`` from an MoE file, refusing gating llama.cpp has but this does not."""
    gating = meta.integer("expert_gating_func", None)
    if gating not in (None, 1):  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX
        raise meta.refuse("expert_gating_func", gating, "the router's scores are a softmax here (1)")
    scale = meta.number("expert_weights_scale", None)
    if scale not in (None, 1.0):
        raise meta.refuse("expert_weights_scale", scale, "routing weights are not scaled here")
    for key in ("expert_group_count", "expert_group_used_count", "expert_shared_count"):
        value = meta.integer(key, None)
        if value not in (None, 0, 1):
            raise meta.refuse(
                key, value, "group-limited routing and several shared experts are not implemented"
            )
    return {
        experts_key: meta.integer("expert_count"),
        "num_experts_per_tok": meta.integer("expert_used_count"),
        "norm_topk_prob": bool(meta.get("expert_weights_norm", renormalize)),
    }


def _dense_layers(hf: dict[str, Any], names: set[str]) -> list[int]:
    """The layers without a router: dense MLPs (Qwen's ``mlp_only_layers``)."""
    return [i for i in range(hf["num_hidden_layers"]) if f"blk.{i}.ffn_gate_inp.weight" not in names]


def _llama(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    values = {
        "hidden_act": "silu",
        "attention_bias": "blk.0.attn_output.bias" in names,
        "mlp_bias": "blk.0.ffn_down.bias" in names,
    }
    if meta.integer("expert_count", 0):  # Mixtral: a llama with experts in every layer
        values.update(model_type="mixtral", **_routing(meta, "num_local_experts", renormalize=True))
    return values


def _qwen_moe(renormalize: bool):
    def config(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
        values = {
            "hidden_act": "silu",
            "qkv_bias": "blk.0.attn_q.bias" in names,  # Qwen2-MoE's key (biases on Q, K and V)
            "attention_bias": "blk.0.attn_q.bias" in names,  # Qwen3-MoE's
            "moe_intermediate_size": meta.integer("expert_feed_forward_length"),
            "mlp_only_layers": _dense_layers(hf, names),
            **_routing(meta, "num_experts", renormalize),
        }
        shared = meta.integer("expert_shared_feed_forward_length", None)
        if shared is not None:
            values["shared_expert_intermediate_size"] = shared
        return values

    return config


def _olmoe(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {"hidden_act": "silu", **_routing(meta, "num_experts", renormalize=False)}


def _gpt_oss(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    values = {
        "attention_bias": "blk.0.attn_q.bias" in names,
        "intermediate_size": meta.integer("expert_feed_forward_length"),
        "sliding_window": meta.integer("attention.sliding_window"),
        "layer_types": sliding_layers(meta, hf["num_hidden_layers"], period=2),
        **_routing(meta, "num_local_experts", renormalize=True),
    }
    if hf.get("rope_scaling") is not None and hf["rope_scaling"]["rope_type"] == "yarn":
        values["rope_scaling"] = {**hf["rope_scaling"], "truncate": False}  # the released config's
    return values


def _silu(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {"hidden_act": "silu"}


def _gemma(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {"hidden_activation": "gelu_pytorch_tanh"}


def _query_scalar(hf: dict[str, Any], layers_27b: int) -> float:
    """llama.cpp's Gemma query scale, as the square of its divisor (``query_pre_attn_scalar``)."""
    if hf["num_hidden_layers"] == layers_27b:
        return hf["hidden_size"] / hf["num_attention_heads"]
    return float(hf["head_dim"])


def _gemma2(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    local_base = meta.number("rope.freq_base_swa", hf["rope_theta"])
    if local_base != hf["rope_theta"]:
        raise meta.refuse("rope.freq_base_swa", local_base, "Gemma 2 has one rotary base for all layers")
    return {
        **_gemma(meta, hf, names),
        "query_pre_attn_scalar": _query_scalar(hf, layers_27b=46),
        "attn_logit_softcapping": meta.number("attn_logit_softcapping", 50.0),
        "final_logit_softcapping": meta.number("final_logit_softcapping", 30.0),
        "sliding_window": meta.integer("attention.sliding_window", 4096),
        "layer_types": sliding_layers(meta, hf["num_hidden_layers"], period=2),
    }


def _gemma3(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    window = meta.integer("attention.sliding_window", 0)
    local_base = meta.number("rope.freq_base_swa", 10000.0)  # read either way: without a window it is unused
    n = hf["num_hidden_layers"]
    values = {
        **_gemma(meta, hf, names),
        "query_pre_attn_scalar": _query_scalar(hf, layers_27b=62),
        "final_logit_softcapping": meta.number("final_logit_softcapping", None),
        "layer_types": ["full_attention"] * n,
    }
    if window:
        values.update(
            sliding_window=window,
            layer_types=sliding_layers(meta, n, period=6),
            rope_local_base_freq=local_base,
        )
    return values


def _phi3(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    window = meta.integer("attention.sliding_window", 0)  # 0: none (Phi-4)
    return {
        "hidden_act": "silu",
        "sliding_window": window or None,
        "original_max_position_embeddings": meta.integer("rope.scaling.original_context_length", None),
    }


def _gptneox(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {
        "hidden_act": "gelu",
        "use_parallel_residual": bool(meta.get("use_parallel_residual", True)),
        "attention_bias": "blk.0.attn_qkv.bias" in names,
    }


def _olmo2(meta: Metadata, hf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    window = meta.integer("attention.sliding_window", None)
    if window is not None:
        raise CheckpointError(
            f"{meta.file.path}: olmo2.attention.sliding_window={window} marks an OLMo 3 model, which is not "
            "supported; supported: OLMo 2 (no sliding window)"
        )
    return {"hidden_act": "silu"}


LLAMA = GGUFArchitecture(
    name="llama",
    model_type="llama",
    tensors={**_LLAMA, **_MIXTRAL_EXPERTS},
    config=_llama,
    permute_qk=True,
    experts=True,
)
QWEN2 = GGUFArchitecture(name="qwen2", model_type="qwen2", tensors=_LLAMA, config=_silu)
QWEN3 = GGUFArchitecture(name="qwen3", model_type="qwen3", tensors={**_LLAMA, **_QK_NORM}, config=_silu)
GEMMA = GGUFArchitecture(name="gemma", model_type="gemma", tensors=_LLAMA, config=_gemma, norm_shift=-1.0)
GEMMA2 = GGUFArchitecture(
    name="gemma2", model_type="gemma2", tensors={**_LLAMA, **_SANDWICH}, config=_gemma2, norm_shift=-1.0
)
GEMMA3 = GGUFArchitecture(
    name="gemma3",
    model_type="gemma3_text",
    tensors={**_LLAMA, **_SANDWICH, **_QK_NORM},
    config=_gemma3,
    norm_shift=-1.0,
)
PHI3 = GGUFArchitecture(
    name="phi3",
    model_type="phi3",
    tensors={
        **{k: v for k, v in _LLAMA.items() if k not in ("attn_q", "attn_k", "attn_v", "ffn_gate")},
        "attn_qkv": "self_attn.qkv_proj",
        "ffn_up": "mlp.gate_up_proj",  # gate rows, then up rows
    },
    config=_phi3,
    qkv="fused",
)
OLMO2 = GGUFArchitecture(
    name="olmo2",
    model_type="olmo2",
    tensors={
        **{k: v for k, v in _LLAMA.items() if k not in ("attn_norm", "ffn_norm")},
        **_QK_NORM,
        "post_attention_norm": "post_attention_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm",
    },
    config=_olmo2,
)
GPTNEOX = GGUFArchitecture(
    name="gptneox",
    model_type="gpt_neox",
    tensors={
        "token_embd": "gpt_neox.embed_in",
        "output_norm": "gpt_neox.final_layer_norm",
        "output": "embed_out",
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
        "attn_qkv": "attention.query_key_value",
        "attn_output": "attention.dense",
        "ffn_up": "mlp.dense_h_to_4h",
        "ffn_down": "mlp.dense_4h_to_h",
    },
    layer_prefix="gpt_neox.layers.{}.",
    config=_gptneox,
    qkv="per_head",
)
QWEN2MOE = GGUFArchitecture(
    name="qwen2moe",
    model_type="qwen2_moe",
    tensors={**_LLAMA, **_EXPERTS, **_SHARED_EXPERT},
    config=_qwen_moe(renormalize=False),
    experts=True,
)
QWEN3MOE = GGUFArchitecture(
    name="qwen3moe",
    model_type="qwen3_moe",
    tensors={**_LLAMA, **_QK_NORM, **_EXPERTS},
    config=_qwen_moe(renormalize=True),
    experts=True,
)
OLMOE = GGUFArchitecture(
    name="olmoe",
    model_type="olmoe",
    tensors={**_LLAMA, **_QK_NORM, **_EXPERTS},
    config=_olmoe,
    experts=True,
)
GPT_OSS = GGUFArchitecture(
    name="gpt-oss",
    model_type="gpt_oss",
    tensors={
        **{k: v for k, v in _LLAMA.items() if k not in ("ffn_norm", "ffn_gate", "ffn_up", "ffn_down")},
        "post_attention_norm": "post_attention_layernorm",
        "attn_sinks": "self_attn.sinks",  # read back without its ".weight" (interp.load.gpt_oss.prepare)
        "ffn_gate_inp": "mlp.router",
        **{k: v for k, v in _EXPERTS.items() if k != "ffn_gate_inp"},
    },
    config=_gpt_oss,
    experts=True,
)
