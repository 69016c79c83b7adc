"""The tests' one factory of tiny random ``transformers`` checkpoints: one table of configs, one builder.

:data:`CONFIGS` names every tiny model a test builds: the families the loader reads, as the parity tests build
them (:data:`FAMILIES`), the configs llama.cpp's converter accepts (``gguf-*``), the narrow models of the hook
tests (``narrow-*``) and a few more; :func:`build` makes one of them, seeded, in eval mode, and saves it with a
tokenizer when asked. A test that needs another size passes config fields to :func:`build`, never a config
of its own.

The parity families' configs exercise what makes each family different (soft-caps, sandwich norms, q/k norms,
partial rotary, fused projections, sliding windows, rotary scaling). Their weights are drawn larger than
``transformers`` initialises them (:func:`embolden`), so that a dropped ``+ 1`` in a Gemma norm, a soft-cap
applied at the wrong place or a swapped gate and up projection changes the logits by far more than the
tolerance.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer as Backend

from tests.load.builders import save_folder

transformers = pytest.importorskip("transformers")

WINDOW = 5  # sliding windows shorter than the test sentences, so the window changes the result

# architecture -> (config class, model class) in transformers
ARCHITECTURES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM"),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "bert": ("BertConfig", "BertForMaskedLM"),
    "bert-plain": ("BertConfig", "BertModel"),
    "bert-classifier": ("BertConfig", "BertForSequenceClassification"),
}

SMALL = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=96,
    max_position_embeddings=128,
)
BPE_IDS = dict(bos_token_id=0, eos_token_id=0, pad_token_id=1)  # the byte-level BPE of tests.load.builders
SMOLLM_IDS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=2)  # SmolLM2's tokenizer
GEMMA_SPM_IDS = dict(pad_token_id=0, eos_token_id=1, bos_token_id=2)
LLAMA_SPM_IDS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)
NARROW = dict(d_model=32, n_heads=4, n_layers=2, n_ctx=32)  # the hook tests' models (hooks.attach, from_hf)
_N = NARROW


def _rope(kind: str, **params) -> dict:
    return {"rope_parameters": {"rope_type": kind, "rope_theta": 10000.0, **params}}


def _longrope(short_step: float) -> dict:
    half = 64 // 4 // 2  # rotary_dim / 2 with head_dim 16, partial factor 1
    return _rope(
        "longrope",
        long_factor=[1.0 + 0.5 * i for i in range(half)],
        short_factor=[1.0 + short_step * i for i in range(half)],
        original_max_position_embeddings=8,
    )


_GEMMA3_ROPE = {
    "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
}
_LLAMA3_ROPE = dict(
    factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16
)
_YARN_ROPE = dict(factor=4.0, original_max_position_embeddings=16, beta_fast=8.0, beta_slow=1.0)
_NEOX = dict(num_key_value_heads=None, use_parallel_residual=True, hidden_act="gelu")
_GPT2 = dict(n_layer=2, n_embd=64, n_head=4, n_positions=64)
_BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96)
# Mixture-of-experts layers: 8 narrow experts, so that the tokens of a short batch leave some expert idle.
_QWEN2_MOE = dict(
    num_hidden_layers=3,
    num_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    shared_expert_intermediate_size=48,
)

# name -> (architecture, config fields); the vocabulary size is build()'s argument
CONFIGS: dict[str, tuple[str, dict]] = {
    # the families the loader reads, as the parity tests build them (FAMILIES)
    "gemma": ("gemma", {**SMALL, **BPE_IDS, "head_dim": 24, "hidden_act": "gelu_pytorch_tanh"}),
    "gemma2": (
        "gemma2",
        {
            **SMALL,
            **BPE_IDS,
            "num_hidden_layers": 3,
            "head_dim": 24,
            "query_pre_attn_scalar": 40,
            "attn_logit_softcapping": 4.0,
            "final_logit_softcapping": 6.0,
            "sliding_window": WINDOW,
        },
    ),
    "gemma3": (
        "gemma3",
        {
            **SMALL,
            **BPE_IDS,
            "num_hidden_layers": 7,
            "hidden_size": 48,
            "head_dim": 16,
            "num_attention_heads": 2,
            "query_pre_attn_scalar": 24,
            "sliding_window": WINDOW,
            "rope_parameters": _GEMMA3_ROPE,
        },
    ),
    "qwen3": ("qwen3", {**SMALL, **BPE_IDS, "head_dim": 24, "tie_word_embeddings": False}),
    "qwen3-sliding": (
        "qwen3",
        {
            **SMALL,
            **BPE_IDS,
            "num_hidden_layers": 3,
            "head_dim": 24,
            "use_sliding_window": True,
            "sliding_window": WINDOW,
            "max_window_layers": 1,
        },
    ),
    "qwen2-sliding": (
        "qwen2",
        {
            **SMALL,
            **BPE_IDS,
            "num_hidden_layers": 3,
            "use_sliding_window": True,
            "sliding_window": WINDOW,
            "max_window_layers": 2,
        },
    ),
    "mistral-sliding": ("mistral", {**SMALL, **BPE_IDS, "num_key_value_heads": 1, "sliding_window": WINDOW}),
    "pythia": ("neox", {**SMALL, **BPE_IDS, **_NEOX, **_rope("default", partial_rotary_factor=0.25)}),
    "neox-sequential": (
        "neox",
        {
            **SMALL,
            **BPE_IDS,
            **_NEOX,
            "use_parallel_residual": False,
            "hidden_act": "gelu_new",
            **_rope("default", partial_rotary_factor=0.5, rope_theta=500.0),
        },
    ),
    "phi3": ("phi3", {**SMALL, **BPE_IDS, "sliding_window": WINDOW, "tie_word_embeddings": False}),
    "phi3-longrope": (
        "phi3",
        {
            **SMALL,
            **BPE_IDS,
            "max_position_embeddings": 64,
            "original_max_position_embeddings": 8,
            **_longrope(0.1),
        },
    ),
    "olmo2": ("olmo2", {**SMALL, **BPE_IDS}),
    # mixture of experts: Mixtral's window, Qwen2-MoE's dense layers and shared expert with and without
    # renormalised weights, Qwen3-MoE's per-head q/k norms, OLMoE's q/k norms over all heads
    "mixtral": (
        "mixtral",
        {**SMALL, **BPE_IDS, "intermediate_size": 32, "num_local_experts": 4, "sliding_window": WINDOW},
    ),
    "qwen2-moe": ("qwen2_moe", {**SMALL, **BPE_IDS, **_QWEN2_MOE, "mlp_only_layers": [1]}),
    "qwen2-moe-norm": (
        "qwen2_moe",
        {**SMALL, **BPE_IDS, **_QWEN2_MOE, "norm_topk_prob": True, "decoder_sparse_step": 2},
    ),
    "qwen3-moe": (
        "qwen3_moe",
        {
            **SMALL,
            **BPE_IDS,
            "head_dim": 24,
            "num_experts": 8,
            "num_experts_per_tok": 3,
            "moe_intermediate_size": 24,
            "norm_topk_prob": True,
        },
    ),
    "olmoe": (
        "olmoe",
        {**SMALL, **BPE_IDS, "intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2},
    ),
    # GPT-OSS: sinks, a window on the even layers, YaRN without truncation, biased router and experts, and a
    # clamp low enough that the emboldened gates and up projections cross it
    "gpt-oss": (
        "gpt_oss",
        {
            **SMALL,
            **BPE_IDS,
            "num_hidden_layers": 3,
            "head_dim": 16,
            "intermediate_size": 32,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "sliding_window": WINDOW,
            "swiglu_limit": 1.5,
            **_rope("yarn", **_YARN_ROPE, truncate=False),
        },
    ),
    "llama3-rope": ("llama", {**SMALL, **BPE_IDS, **_rope("llama3", **_LLAMA3_ROPE)}),
    "linear-rope": ("llama", {**SMALL, **BPE_IDS, **_rope("linear", factor=3.0)}),
    "dynamic-rope": (  # dynamic scaling only acts past max_position_embeddings
        "llama",
        {**SMALL, **BPE_IDS, "max_position_embeddings": 20, **_rope("dynamic", factor=2.0)},
    ),
    "yarn-rope": ("llama", {**SMALL, **BPE_IDS, **_rope("yarn", **_YARN_ROPE)}),
    # the plain checkpoints of the loader's tests (tiny_llama) and of the folder parity tests
    "llama": ("llama", {**SMALL, "rms_norm_eps": 1e-6, "bos_token_id": 0, "eos_token_id": 0}),
    "qwen2": ("qwen2", {**SMALL, "tie_word_embeddings": True}),
    "mistral": ("mistral", {**SMALL, "num_key_value_heads": 1, "sliding_window": 48}),
    "gpt2": ("gpt2", _GPT2),
    "bert": ("bert", _BERT),
    "bert-plain": ("bert-plain", _BERT),
    "bert-classifier": (  # a head the loader does not know
        "bert-classifier",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=48),
    ),
    # what llama.cpp's converter accepts, per GGUF architecture (tests.load.gguf_models), with the ids of the
    # tokenizer each folder carries; Gemma's query scale is the one llama.cpp derives from head_dim
    "gguf-gemma": ("gemma", GEMMA_SPM_IDS),
    "gguf-gemma2": ("gemma2", {**GEMMA_SPM_IDS, "query_pre_attn_scalar": 24}),
    "gguf-gemma3": ("gemma3", {**SMOLLM_IDS, "query_pre_attn_scalar": 16}),
    "gguf-qwen2": ("qwen2", {**SMALL, **LLAMA_SPM_IDS}),
    "gguf-qwen3": (
        "qwen3",
        {**SMOLLM_IDS, "hidden_size": 32, "head_dim": 16, **_rope("yarn", **_YARN_ROPE)},
    ),
    "gguf-phi3": (
        "phi3",
        {**LLAMA_SPM_IDS, "sliding_window": WINDOW, "tie_word_embeddings": False, **_longrope(0.125)},
    ),
    "gguf-pythia": ("neox", SMOLLM_IDS),
    "gguf-olmo2": ("olmo2", {**SMOLLM_IDS, "hidden_size": 32}),
    "gguf-llama3": ("llama", {**SMOLLM_IDS, "hidden_size": 32}),
    # llama.cpp writes no dense layers in a qwen2moe file, and says nothing of norm_topk_prob: it renormalises
    # Qwen3-MoE's weights and Mixtral's, not Qwen2-MoE's or OLMoE's, as the released models do
    "gguf-mixtral": ("mixtral", {**SMOLLM_IDS, "hidden_size": 32, "sliding_window": None}),
    "gguf-qwen2-moe": (
        "qwen2_moe",
        {
            **SMOLLM_IDS,
            "hidden_size": 32,
            "norm_topk_prob": False,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
        },
    ),
    "gguf-qwen3-moe": ("qwen3_moe", {**SMOLLM_IDS, "hidden_size": 32, "head_dim": 16}),
    "gguf-olmoe": ("olmoe", {**SMOLLM_IDS, "hidden_size": 32, "rms_norm_eps": 1e-5}),
    # rows of 32 values, MXFP4's groups; the clamp llama.cpp fixes, since a file cannot store it
    "gguf-gpt-oss": ("gpt_oss", {**SMOLLM_IDS, "hidden_size": 32, "swiglu_limit": 7.0}),
    # the narrow models of the hook tests
    "narrow-gpt2": (
        "gpt2",
        dict(n_layer=_N["n_layers"], n_embd=_N["d_model"], n_head=_N["n_heads"], n_positions=_N["n_ctx"])
        | dict(bos_token_id=0, eos_token_id=0),
    ),
    "narrow-bert": (
        "bert",
        dict(
            num_hidden_layers=_N["n_layers"],
            hidden_size=_N["d_model"],
            num_attention_heads=_N["n_heads"],
            intermediate_size=4 * _N["d_model"],
            max_position_embeddings=_N["n_ctx"],
            pad_token_id=0,
        ),
    ),
    "narrow-llama": (
        "llama",
        dict(
            num_hidden_layers=_N["n_layers"],
            hidden_size=_N["d_model"],
            num_attention_heads=_N["n_heads"],
            num_key_value_heads=2,
            intermediate_size=2 * _N["d_model"],
            max_position_embeddings=_N["n_ctx"],
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
        ),
    ),
}

# A GGUF variant is its family's parity config with the variant's fields on top (ids, query scale, sizes).
_GGUF_BASE = {
    "gguf-gemma": "gemma",
    "gguf-gemma2": "gemma2",
    "gguf-gemma3": "gemma3",
    "gguf-qwen3": "qwen3",
    "gguf-phi3": "phi3-longrope",
    "gguf-pythia": "pythia",
    "gguf-olmo2": "olmo2",
    "gguf-llama3": "llama3-rope",
    "gguf-mixtral": "mixtral",
    "gguf-qwen2-moe": "qwen2-moe-norm",
    "gguf-qwen3-moe": "qwen3-moe",
    "gguf-olmoe": "olmoe",
    "gguf-gpt-oss": "gpt-oss",
}
for _name, _base in _GGUF_BASE.items():
    _arch, _fields = CONFIGS[_name]
    CONFIGS[_name] = (_arch, {**CONFIGS[_base][1], **_fields})

MOE = ("mixtral", "qwen2-moe", "qwen2-moe-norm", "qwen3-moe", "olmoe", "gpt-oss")
"""The mixture-of-experts families, whose parity tests also compare the router's logits."""

FAMILIES = (
    "gemma",
    "gemma2",
    "gemma3",
    "qwen3",
    "qwen3-sliding",
    "qwen2-sliding",
    "mistral-sliding",
    "pythia",
    "neox-sequential",
    "phi3",
    "phi3-longrope",
    "olmo2",
    "llama3-rope",
    "linear-rope",
    "dynamic-rope",
    "yarn-rope",
    *MOE,
)
"""The families the loader's parity tests run, each built with :func:`build` (eager attention, emboldened)."""


def build(
    name: str,
    vocab: int,
    attn: str | None = "eager",
    *,
    widen: bool = True,
    seed: int | None = 0,
    folder: Path | None = None,
    tokenizer: Backend | None = None,
    save_kwargs: dict | None = None,
    **fields,
) -> torch.nn.Module:
    """The tiny model ``name`` of :data:`CONFIGS`, in eval mode.

    Args:
        name: a key of :data:`CONFIGS`.
        vocab: its vocabulary size.
        attn: the attention implementation (``"eager"``, ``"sdpa"``), or ``None`` for ``transformers``' default.
        widen: draw the weights large (:func:`embolden`); ``False`` keeps ``transformers``' initialisation.
        seed: ``torch.manual_seed`` before the weights are drawn; ``None`` leaves the global generator as it is.
        folder, tokenizer: save the model there with ``save_pretrained`` and the tokenizer's ``tokenizer.json``.
        save_kwargs: more arguments of ``save_pretrained`` (``max_shard_size``...).
        fields: config fields on top of the table's (another size, another rotary base...).
    """
    architecture, table = CONFIGS[name]
    config_class, model_class = (getattr(transformers, c) for c in ARCHITECTURES[architecture])
    config = config_class(**{**table, **fields, "vocab_size": vocab})
    if seed is not None:
        torch.manual_seed(seed)
    if attn is None:
        model = model_class(config)
    else:
        model = model_class._from_config(config, attn_implementation=attn)
    if widen:
        embolden(model)
    model.eval()
    if folder is not None:
        if tokenizer is None:
            raise ValueError("saving a checkpoint needs its tokenizer")
        save_folder(model, tokenizer, folder, **(save_kwargs or {}))
    return model


def tiny_llama(vocab_size: int, **fields) -> torch.nn.Module:
    """A random two-layer Llama with grouped-query attention (4 query heads, 2 key/value heads), as
    ``transformers`` initialises it."""
    return build("llama", vocab_size, None, widen=False, **fields)


def embolden(model: torch.nn.Module) -> None:
    """Matrices ~ N(0, 1 / fan_in) * 1.5 and vectors (norms, biases) ~ N(0, 0.3) around their init."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim >= 2:
                fan_in = param.shape[-1]
                param.copy_(torch.randn(param.shape, generator=generator) * 1.5 / math.sqrt(fan_in))
            else:
                param.add_(0.3 * torch.randn(param.shape, generator=generator))
