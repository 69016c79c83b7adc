"""Tiny random ``transformers`` models of every family the loader reads, for the parity tests.

Each builder returns a model whose config exercises what makes its family different (soft-caps, sandwich
norms, q/k norms, partial rotary, fused projections, sliding windows, rotary scaling). Weights are drawn
larger than ``transformers`` initialises them, so that a dropped ``+ 1`` in a Gemma norm, a soft-cap applied
at the wrong place or a swapped gate and up projection changes the logits by far more than the tolerance.
"""

from __future__ import annotations

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

WINDOW = 5  # sliding windows shorter than the test sentences, so the window changes the result


def _common(vocab: int, **overrides) -> dict:
    kwargs = dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        vocab_size=vocab,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    kwargs.update(overrides)
    return kwargs


def gemma(vocab: int):
    cfg = transformers.GemmaConfig(**_common(vocab, head_dim=24, hidden_act="gelu_pytorch_tanh"))
    return transformers.GemmaForCausalLM(cfg)


def gemma2(vocab: int):
    cfg = transformers.Gemma2Config(
        **_common(vocab, num_hidden_layers=3, head_dim=24),
        query_pre_attn_scalar=40,
        attn_logit_softcapping=4.0,
        final_logit_softcapping=6.0,
        sliding_window=WINDOW,
    )
    return transformers.Gemma2ForCausalLM(cfg)


def gemma3(vocab: int):
    cfg = transformers.Gemma3TextConfig(
        **_common(vocab, num_hidden_layers=7, hidden_size=48, head_dim=16, num_attention_heads=2),
        query_pre_attn_scalar=24,
        sliding_window=WINDOW,
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
        },
    )
    return transformers.Gemma3ForCausalLM(cfg)


def qwen3(vocab: int):
    cfg = transformers.Qwen3Config(**_common(vocab, head_dim=24), tie_word_embeddings=False)
    return transformers.Qwen3ForCausalLM(cfg)


def qwen3_sliding(vocab: int):
    cfg = transformers.Qwen3Config(
        **_common(vocab, num_hidden_layers=3, head_dim=24),
        use_sliding_window=True,
        sliding_window=WINDOW,
        max_window_layers=1,
    )
    return transformers.Qwen3ForCausalLM(cfg)


def qwen2_sliding(vocab: int):
    cfg = transformers.Qwen2Config(
        **_common(vocab, num_hidden_layers=3),
        use_sliding_window=True,
        sliding_window=WINDOW,
        max_window_layers=2,
    )
    return transformers.Qwen2ForCausalLM(cfg)


def mistral_sliding(vocab: int):
    cfg = transformers.MistralConfig(**_common(vocab, num_key_value_heads=1), sliding_window=WINDOW)
    return transformers.MistralForCausalLM(cfg)


def pythia(vocab: int):
    cfg = transformers.GPTNeoXConfig(
        **_common(vocab, num_key_value_heads=None),
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        use_parallel_residual=True,
        hidden_act="gelu",
    )
    return transformers.GPTNeoXForCausalLM(cfg)


def neox_sequential(vocab: int):
    cfg = transformers.GPTNeoXConfig(
        **_common(vocab, num_key_value_heads=None),
        rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5},
        use_parallel_residual=False,
        hidden_act="gelu_new",
    )
    return transformers.GPTNeoXForCausalLM(cfg)


def phi3(vocab: int):
    cfg = transformers.Phi3Config(**_common(vocab), sliding_window=WINDOW, tie_word_embeddings=False)
    return transformers.Phi3ForCausalLM(cfg)


def phi3_longrope(vocab: int):
    half = 64 // 4 // 2  # rotary_dim / 2 with head_dim 16, partial factor 1
    cfg = transformers.Phi3Config(
        **_common(vocab, max_position_embeddings=64),
        original_max_position_embeddings=8,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "long_factor": [1.0 + 0.5 * i for i in range(half)],
            "short_factor": [1.0 + 0.1 * i for i in range(half)],
            "original_max_position_embeddings": 8,
        },
    )
    return transformers.Phi3ForCausalLM(cfg)


def olmo2(vocab: int):
    cfg = transformers.Olmo2Config(**_common(vocab))
    return transformers.Olmo2ForCausalLM(cfg)


def llama_scaled(kind: str):
    """A Llama whose rotary frequencies are scaled by ``kind``."""
    params = {
        "llama3": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
        "linear": {"factor": 3.0},
        "dynamic": {"factor": 2.0},
        "yarn": {"factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 8.0, "beta_slow": 1.0},
    }[kind]

    def build(vocab: int):
        mpe = 20 if kind == "dynamic" else 128  # dynamic scaling only acts past max_position_embeddings
        cfg = transformers.LlamaConfig(
            **_common(vocab, max_position_embeddings=mpe),
            rope_parameters={"rope_type": kind, "rope_theta": 10000.0, **params},
        )
        return transformers.LlamaForCausalLM(cfg)

    return build


FAMILIES = {
    "gemma": gemma,
    "gemma2": gemma2,
    "gemma3": gemma3,
    "qwen3": qwen3,
    "qwen3-sliding": qwen3_sliding,
    "qwen2-sliding": qwen2_sliding,
    "mistral-sliding": mistral_sliding,
    "pythia": pythia,
    "neox-sequential": neox_sequential,
    "phi3": phi3,
    "phi3-longrope": phi3_longrope,
    "olmo2": olmo2,
    "llama3-rope": llama_scaled("llama3"),
    "linear-rope": llama_scaled("linear"),
    "dynamic-rope": llama_scaled("dynamic"),
    "yarn-rope": llama_scaled("yarn"),
}


def build(name: str, vocab: int, attn: str = "eager") -> torch.nn.Module:
    """The reference model of ``name``, eager attention, with weights large enough to matter."""
    torch.manual_seed(0)
    model = FAMILIES[name](vocab)
    model.config._attn_implementation = attn
    embolden(model)
    return model.eval()


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
