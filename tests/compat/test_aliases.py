"""TransformerLens 3's canonical names are aliases of interp's hook points: the very same point, firing once."""

from __future__ import annotations

import pytest
import torch

from hooks import UnknownHookError
from tests.compat.models import gqa_model, tl_model

TOKENS = torch.tensor([[1, 5, 9, 3, 7]])


@pytest.fixture(scope="module")
def model():
    return tl_model(process=False)


def test_every_alias_is_the_point_of_its_canonical_name(model):
    aliases = model.hook_aliases().names
    assert aliases["blocks.1.hook_in"] == "blocks.1.hook_resid_pre"
    assert aliases["blocks.0.attn.hook_out"] == "blocks.0.hook_attn_out"
    assert aliases["ln_final.hook_out"] == "unembed.hook_in"
    for alias, canonical in aliases.items():
        assert model.resolve(alias) == [canonical]
        assert canonical in model.hook_dict and alias not in model.hook_dict


def test_a_hook_under_an_alias_fires_at_the_canonical_point_once(model):
    for alias, canonical in model.hook_aliases().names.items():
        seen: list[tuple[str, str]] = []

        def record(x, hook, tag, seen=seen):
            seen.append((tag, hook.name))

        hooks = [
            (alias, lambda x, hook: record(x, hook, "alias")),
            (canonical, lambda x, hook: record(x, hook, "canonical")),
        ]
        model.run_with_hooks(TOKENS, fwd_hooks=hooks)
        assert seen == [("alias", canonical), ("canonical", canonical)], alias


def test_a_predicate_matching_both_names_hooks_the_point_once(model):
    fired: list[str] = []
    model.run_with_hooks(
        TOKENS,
        fwd_hooks=[
            (
                lambda n: n in ("blocks.0.hook_in", "blocks.0.hook_resid_pre"),
                lambda x, h: fired.append(h.name),
            )
        ],
    )
    assert fired == ["blocks.0.hook_resid_pre"]
    fired.clear()
    model.run_with_hooks(TOKENS, fwd_hooks=[("blocks.?.hook_in", lambda x, h: fired.append(h.name))])
    assert fired == ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre"]


def test_the_cache_answers_to_aliases(model):
    _, cache = model.run_with_cache(TOKENS)
    assert torch.equal(cache["blocks.1.hook_out"], cache["blocks.1.hook_resid_post"])
    assert torch.equal(cache["blocks.0.attn.q.hook_out"], cache["blocks.0.attn.hook_q"])
    assert "blocks.0.mlp.hook_out" in cache and "blocks.0.mlp.hook_pre" in cache


def test_a_name_without_a_hook_point_says_what_to_use(model):
    with pytest.raises(UnknownHookError, match=r"blocks\.0\.ln1\.hook_normalized"):
        model.run_with_hooks(TOKENS, fwd_hooks=[("blocks.0.attn.hook_in", lambda x, h: None)])
    with pytest.raises(UnknownHookError, match="split_inputs"):
        model.run_with_cache(TOKENS, names_filter=["blocks.1.hook_mlp_in"])


def test_gated_mlp_names():
    aliases = gqa_model().hook_aliases().names
    assert aliases["blocks.0.mlp.gate.hook_out"] == "blocks.0.mlp.hook_pre"
    assert aliases["blocks.0.mlp.in.hook_out"] == "blocks.0.mlp.hook_pre_linear"
    assert "blocks.0.ln1.hook_in" in aliases and "ln_final.hook_in" in aliases


def test_no_alias_where_the_words_mean_another_place():
    post = gqa_model(
        norm="layernorm", norm_placement="post", positional="learned", mlp="standard", act="gelu"
    )
    aliases = post.hook_aliases().names
    assert "blocks.0.attn.hook_out" not in aliases and "blocks.0.ln2.hook_in" not in aliases
    assert aliases["blocks.0.hook_in"] == "blocks.0.hook_resid_pre"


def test_interp_cache_takes_a_tensor_layer_index():
    _, cache = gqa_model().run_with_cache(TOKENS, names_filter="blocks.1.attn.hook_pattern")
    assert type(cache).__module__ == "hooks.cache"
    assert torch.equal(cache["pattern", torch.tensor(1)], cache["blocks.1.attn.hook_pattern"])
    assert torch.equal(cache["blocks.1.attn.hook_pattern"], cache["pattern", -1])
