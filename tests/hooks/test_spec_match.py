"""Attention spec patterns: '*' stays within a path segment, '**' spans segments; specs checked when attaching."""

from __future__ import annotations

import doctest

import pytest
import torch
from torch import nn

import hooks.spec_match
from hooks import AttentionSpec, attach
from hooks.attention_spec import AttentionSpecError
from hooks.spec_match import path_regex
from tests.hooks.test_attach import SPEC, H, Toy, ToyAttention


def matches(pattern: str, paths: list[str]) -> list[str]:
    regex = path_regex(pattern)
    return [p for p in paths if regex.fullmatch(p)]


PATHS = [
    "",
    "embed",
    "layers",
    "layers.0",
    "layers.0.attn",
    "layers.0.attn.qkv",
    "layers.0.inner.attn",
    "layers.10.attn",
    "encoder.layers.3.attn",
    "attn",
]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("layers.*.attn", ["layers.0.attn", "layers.10.attn"]),
        ("layers.*", ["layers.0"]),
        (
            "**.attn",
            ["layers.0.attn", "layers.0.inner.attn", "layers.10.attn", "encoder.layers.3.attn", "attn"],
        ),
        ("layers.**.attn", ["layers.0.attn", "layers.0.inner.attn", "layers.10.attn"]),
        (
            "layers.**",
            ["layers.0", "layers.0.attn", "layers.0.attn.qkv", "layers.0.inner.attn", "layers.10.attn"],
        ),
        ("layers.?.attn", ["layers.0.attn"]),
        ("layers.[!0].attn", []),
        ("layers.[0-9]*.attn", ["layers.0.attn", "layers.10.attn"]),
        ("", [""]),
        ("**", PATHS),
        ("layers.0.attn", ["layers.0.attn"]),
    ],
)
def test_glob_semantics(pattern, expected):
    assert matches(pattern, PATHS) == expected


def test_the_docstring_examples_hold():
    result = doctest.testmod(hooks.spec_match)
    assert result.attempted > 0 and result.failed == 0


def test_a_missing_submodule_is_named_when_attaching():
    toy = Toy().eval()
    wrong = AttentionSpec(qkv="qkvv", out="out", n_heads=H, causal=True)
    with pytest.raises(AttentionSpecError) as caught:
        attach(toy, {"layers.*.attn": wrong})
    message = str(caught.value)
    assert "the attention pattern 'layers.*.attn' matches 'layers.0.attn' (ToyAttention)" in message
    assert "has no submodule 'qkvv' (the spec's qkv='qkvv'); did you mean 'qkv'?" in message
    assert "\n" not in message
    assert all("forward" not in m.__dict__ for m in toy.modules())  # nothing was left attached


def test_a_pattern_that_used_to_cross_dots_now_matches_only_its_segment():
    toy = Toy().eval()
    # Before, '*' crossed dots and 'layers.*' also hit 'layers.0.attn.qkv'. Now it names the blocks only,
    # which the spec does not fit: refused when attaching, naming the block.
    with pytest.raises(
        AttentionSpecError, match=r"'layers.\*' matches 'layers.0' \(ToyBlock\), which has no submodule 'qkv'"
    ):
        attach(toy, {"layers.*": SPEC})
    with attach(toy, {"**.attn": SPEC}) as hooked:  # any depth, explicitly
        _, cache = hooked.run_with_cache(
            torch.zeros(1, 3, dtype=torch.long), names_filter="layers.*.attn.hook_pattern"
        )
    assert sorted(cache) == ["layers.0.attn.hook_pattern", "layers.1.attn.hook_pattern"]


def test_widths_that_do_not_split_into_heads_are_refused_when_attaching():
    attn = ToyAttention()  # qkv: 16 -> 48, out: 16 -> 16
    with pytest.raises(
        AttentionSpecError, match=r"fused qkv width 48 is not divisible by n_heads \+ 2 \* n_kv_heads=15"
    ):
        attach(attn, {"": AttentionSpec(qkv="qkv", out="out", n_heads=5)})
    with pytest.raises(
        AttentionSpecError,
        match=r"out='out' takes 16 features, but the heads give n_heads x d_head = 4 x 8 = 32",
    ):
        attach(attn, {"": AttentionSpec(qkv="qkv", out="out", n_heads=4, n_kv_heads=1, d_head=8)})


def test_a_spec_function_chooses_modules():
    toy = Toy().eval()

    def only_attention(module: nn.Module) -> AttentionSpec | None:
        return SPEC if isinstance(module, ToyAttention) else None

    with attach(toy, {"**": only_attention}) as hooked:
        assert "layers.1.attn.hook_z" in hooked.hook_names()
