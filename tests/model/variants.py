"""Tiny configurations covering every architectural variant, shared by the model tests."""

import itertools

from interp import TransformerConfig

VARIANTS = [
    dict(norm_placement=placement, positional=positional, n_kv_heads=kv, mlp=mlp)
    for placement, positional, kv, mlp in itertools.product(
        ("pre", "post"), ("learned", "sinusoidal", "rotary", "none"), (4, 2), ("standard", "gated")
    )
]


def variant_id(v: dict) -> str:
    return f"{v['norm_placement']}-{v['positional']}-{'mha' if v['n_kv_heads'] == 4 else 'gqa'}-{v['mlp']}"


def tiny_config(**overrides) -> TransformerConfig:
    base = dict(n_layers=2, d_model=32, n_heads=4, d_mlp=48, d_vocab=61, n_ctx=16, seed=0)
    base.update(overrides)
    if base.get("mlp") == "gated":
        base.setdefault("act", "silu")
    return TransformerConfig(**base)
