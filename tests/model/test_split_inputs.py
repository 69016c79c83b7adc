"""Split inputs: every head and MLP reads a stream of its own, the function computed stays the same."""

import pytest
import torch

from interp import HookedTransformer
from tests.model.variants import FAMILY_VARIANTS, tiny_config

CONFIGS = {
    "gpt2": dict(),
    "llama-gqa": dict(positional="rotary", n_kv_heads=2, mlp="gated"),
    **FAMILY_VARIANTS,
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_split_inputs_compute_the_same_function(name):
    model = HookedTransformer(tiny_config(**CONFIGS[name]))
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 7))
    plain = model(tokens)
    with model.split_inputs():
        split = model(tokens)
        names = model.hook_names()
    torch.testing.assert_close(split, plain, atol=1e-5, rtol=1e-5)
    assert {"blocks.1.hook_q_input", "blocks.1.hook_k_input", "blocks.1.hook_mlp_in"} <= set(names)
    assert not any("_input" in n or "mlp_in" in n for n in model.hook_names())


def test_an_edit_reaches_only_the_head_it_targets():
    model = HookedTransformer(tiny_config(positional="rotary", n_kv_heads=2, mlp="gated"))
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6))
    names = [
        "blocks.1.attn.hook_q",
        "blocks.1.attn.hook_k",
        "blocks.1.hook_resid_mid",
        "blocks.1.hook_mlp_out",
    ]

    direction = torch.randn(
        model.cfg.d_model, generator=torch.Generator().manual_seed(0)
    )  # not removed by centring

    def bump_head_2(x, hook):
        x = x.clone()
        x[:, :, 2] += direction
        return x

    def bump(x, hook):
        return x + direction

    with model.split_inputs():
        _, base = model.run_with_cache(tokens, names_filter=names)
        _, edited = model.run_with_cache(
            tokens, names_filter=names, fwd_hooks=[("blocks.1.hook_q_input", bump_head_2)]
        )
        _, mlp = model.run_with_cache(tokens, names_filter=names, fwd_hooks=[("blocks.1.hook_mlp_in", bump)])
    q, q_edit = base["blocks.1.attn.hook_q"], edited["blocks.1.attn.hook_q"]
    others = [0, 1, 3]
    torch.testing.assert_close(q_edit[:, :, others], q[:, :, others], atol=0, rtol=0)
    assert (q_edit[:, :, 2] - q[:, :, 2]).abs().max() > 1e-3
    torch.testing.assert_close(edited["blocks.1.attn.hook_k"], base["blocks.1.attn.hook_k"], atol=0, rtol=0)
    # the MLP's own input: its output moves, the stream it is added to does not
    torch.testing.assert_close(
        mlp["blocks.1.hook_resid_mid"], base["blocks.1.hook_resid_mid"], atol=0, rtol=0
    )
    assert (mlp["blocks.1.hook_mlp_out"] - base["blocks.1.hook_mlp_out"]).abs().max() > 1e-3


def test_split_inputs_are_removed_also_after_an_error():
    model = HookedTransformer(tiny_config())
    before = model.hook_names()
    with pytest.raises(RuntimeError, match="inside"):
        with model.split_inputs():
            raise RuntimeError("inside")
    assert model.hook_names() == before
    post = HookedTransformer(tiny_config(norm_placement="post", causal=False))
    with pytest.raises(ValueError, match="a post-norm block norms the stream after the add"):
        with post.split_inputs():
            pass
    assert (
        post.hook_names() == HookedTransformer(tiny_config(norm_placement="post", causal=False)).hook_names()
    )
