"""The loader's shape contract (docs/PARAMS.md) is exactly the model's parameters, for every variant."""

from __future__ import annotations

import itertools

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from interp.load import CheckpointError
from interp.load.shapes import check_state_dict, expected_shapes

VARIANTS = [
    dict(norm=norm, norm_placement=placement, positional=positional, n_kv_heads=kv, mlp=mlp, lm_head=head)
    for norm, placement, positional, kv, mlp, head in itertools.product(
        ("layernorm", "rmsnorm"), ("pre", "post"), ("learned", "rotary"), (4, 2), ("standard", "gated"),
        ("linear", "mlm", "none"),
    )
]  # fmt: skip


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(str(x) for x in v.values()))
@pytest.mark.parametrize("bias", [True, False])
def test_expected_shapes_are_the_model_parameters(variant, bias):
    cfg = TransformerConfig(
        n_layers=2, d_model=16, n_heads=4, d_mlp=24, d_vocab=11, n_ctx=8, attn_bias=bias, mlp_bias=bias,
        embed_norm=variant["norm_placement"] == "post", **variant,
    )  # fmt: skip
    model = HookedTransformer(cfg, init_weights=False)
    actual = {name: tuple(p.shape) for name, p in model.state_dict().items()}
    assert expected_shapes(cfg) == actual


def test_check_state_dict_reports_by_name():
    cfg = TransformerConfig(n_layers=1, d_model=8, n_heads=2, d_vocab=5, n_ctx=4)
    state = {name: torch.zeros(shape) for name, shape in expected_shapes(cfg).items()}
    check_state_dict(state, cfg, "ok")
    state["blocks.0.attn.W_Q"] = torch.zeros(2, 8, 3)
    del state["unembed.b_U"]
    state["extra"] = torch.zeros(1)
    with pytest.raises(
        CheckpointError, match=r"missing \['unembed.b_U'\], unexpected \['extra'\], wrong shapes"
    ):
        check_state_dict(state, cfg, "bad")


@pytest.mark.parametrize(
    "fields",
    [
        dict(d_shared_expert=12, shared_expert_gate=True, mlp_types=("moe", "dense"), mlp_bias=False),
        dict(router_bias=True, attn_sinks=True, glu_clamp=7.0, act="gelu_quick"),  # GPT-OSS
    ],
    ids=["qwen2-moe", "gpt-oss"],
)
def test_expected_shapes_of_mixture_of_experts_layers(fields):
    cfg = TransformerConfig(
        n_layers=2, d_model=16, n_heads=4, d_mlp=24, d_vocab=11, n_ctx=8, mlp="gated", positional="rotary",
        norm="rmsnorm", n_experts=4, experts_per_token=2, d_expert=8, **fields,
    )  # fmt: skip
    model = HookedTransformer(cfg, init_weights=False)
    actual = {name: tuple(p.shape) for name, p in model.state_dict().items()}
    assert expected_shapes(cfg) == actual
