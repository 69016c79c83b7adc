"""Tiny configurations covering every architectural variant, shared by the model tests."""

import itertools

from interp import TransformerConfig

VARIANTS = [
    dict(norm_placement=placement, positional=positional, n_kv_heads=kv, mlp=mlp)
    for placement, positional, kv, mlp in itertools.product(
        ("pre", "post"), ("learned", "sinusoidal", "rotary", "none"), (4, 2), ("standard", "gated")
    )
]


# What the newer families add, each on top of a rotary, gated, RMSNorm model (and LayerNorm for GPT-NeoX).
_ROTARY = dict(norm="rmsnorm", positional="rotary", mlp="gated", n_kv_heads=2)
FAMILY_VARIANTS = {
    "gemma2": dict(
        _ROTARY,
        norm_placement="sandwich",
        norm_offset=1.0,
        norm_gain_in_float32=True,
        embed_scale=5.0,
        attn_scale=3.0,
        attn_softcap=2.0,
        logit_softcap=4.0,
        sliding_window=3,
        layer_types=("sliding", "full"),
    ),
    "gemma3": dict(
        _ROTARY,
        norm_placement="sandwich",
        qk_norm="head",
        sliding_window=3,
        layer_types=("sliding", "full"),
        local_rotary_base=100.0,
    ),
    "qwen3": dict(_ROTARY, qk_norm="head", d_head=12),
    "olmo2": dict(_ROTARY, norm_placement="output", qk_norm="full"),
    "neox": dict(positional="rotary", rotary_dim=4, parallel_attn_mlp=True),
    "mistral": dict(_ROTARY, sliding_window=3),
    # mixture of experts: Mixtral (top 2 of 4, renormalised, a window), Qwen2-MoE (a dense layer, a gated shared
    # expert, weights not renormalised), OLMoE (q/k norms over all heads, 8 experts, some idle on short inputs)
    "mixtral": dict(_ROTARY, n_experts=4, experts_per_token=2, d_expert=16, sliding_window=3),
    "qwen2_moe": dict(
        _ROTARY,
        n_experts=4,
        experts_per_token=2,
        d_expert=8,
        d_shared_expert=24,
        shared_expert_gate=True,
        expert_weights="softmax",
        mlp_types=("moe", "dense"),
    ),
    "olmoe": dict(
        _ROTARY, qk_norm="full", n_experts=8, experts_per_token=2, d_expert=16, expert_weights="softmax"
    ),
    # GPT-OSS: attention sinks, alternating windows, a biased router and experts, the clamped unit
    "gpt_oss": dict(
        _ROTARY,
        attn_sinks=True,
        sliding_window=3,
        layer_types=("sliding", "full"),
        n_experts=4,
        experts_per_token=2,
        d_expert=16,
        router_bias=True,
        glu_clamp=1.0,
        act="gelu_quick",
    ),
}


def variant_id(v: dict) -> str:
    return f"{v['norm_placement']}-{v['positional']}-{'mha' if v['n_kv_heads'] == 4 else 'gqa'}-{v['mlp']}"


def tiny_config(**overrides) -> TransformerConfig:
    base = dict(n_layers=2, d_model=32, n_heads=4, d_mlp=48, d_vocab=61, n_ctx=16, seed=0)
    base.update(overrides)
    if base.get("mlp") == "gated":
        base.setdefault("act", "silu")
    return TransformerConfig(**base)
