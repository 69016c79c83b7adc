"""A Lorsa spliced in place of attention (at chosen layers, with and without the error term), and the complete
replacement model (Lorsa and transcoders at every layer), checked against forwards done by hand; its hook points
(the pattern among them, held at cached values), padding and the KV cache."""

from __future__ import annotations

import pytest
import torch

from interp.sae import spliced
from tests.sae.lorsa.factories import random_lorsa
from tests.sae.models import D_MODEL, tiny_model, tokens
from tests.sae.transcoder.factories import random_set, replacement_hooks


def _model():
    return tiny_model(positional="rotary")


def _lorsa(layers=(0, 1), **settings):
    return random_lorsa(
        layers, d_model=D_MODEL, n_heads=12, n_qk_heads=3, d_qk_head=8, k=3, seed=4, **settings
    )


def lorsa_by_hand(lorsa, valid=None) -> list:
    """Hooks that run Lorsa in place of attention by hand: the input hook's sequences kept, the output hook's
    activation replaced by ``lorsa.reconstruct`` of them."""
    inputs = {}

    def read(layer):
        def fn(x, hook):
            inputs[layer] = x.detach().clone()

        return fn

    def write(layer):
        return lambda x, hook: lorsa.reconstruct({layer: inputs[layer]}, valid)[layer]

    hooks = []
    for layer in lorsa.layers:
        hooks += [(lorsa.input_hook(layer), read(layer)), (lorsa.output_hook(layer), write(layer))]
    return hooks


def test_lorsa_in_place_of_attention_runs_as_by_hand_at_every_layer_or_at_chosen_ones():
    model, ids = _model(), tokens()
    lorsa = _lorsa()
    with torch.no_grad():
        clean = model(ids)
        for chosen in (lorsa, lorsa.at([1])):
            want = model.run_with_hooks(ids, fwd_hooks=lorsa_by_hand(chosen))
            with spliced(model, chosen):
                got = model(ids)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
            assert not torch.allclose(got, clean)
        assert lorsa.at([1]).layers == [1] and lorsa.at([1]).layer(1) is lorsa.layer(1)


def test_with_the_error_term_the_output_is_the_models_and_the_error_is_what_lorsa_misses():
    model, ids = _model(), tokens()
    lorsa = _lorsa()
    with torch.no_grad():
        clean, cache = model.run_with_cache(ids, names_filter=["*.ln1.hook_normalized", "*.hook_attn_out"])
        with model.saes(lorsa, use_error_term=True):
            logits, spliced_cache = model.run_with_cache(ids, names_filter="*.hook_sae_error")
    # the input hooks observed take the norm's explicit path, as they did in the clean run
    torch.testing.assert_close(logits, clean, rtol=0, atol=0)
    for layer in (0, 1):
        recons = lorsa.reconstruct({layer: cache[f"blocks.{layer}.ln1.hook_normalized"]})[layer]
        error = spliced_cache[f"blocks.{layer}.hook_attn_out.hook_sae_error"]
        torch.testing.assert_close(
            error, cache[f"blocks.{layer}.hook_attn_out"] - recons, rtol=1e-5, atol=1e-6
        )


def test_the_hook_points_are_listed_and_cached_and_the_pattern_can_be_held():
    model, ids = _model(), tokens(batch=1, pos=6)
    other = tokens(batch=1, pos=6, seed=3)
    lorsa = _lorsa(layers=(1,))
    names = [
        f"blocks.1.hook_attn_out.{h}" for h in ("hook_lorsa_pattern", "hook_lorsa_v", "hook_sae_acts_pre")
    ]
    with torch.no_grad(), spliced(model, lorsa):
        order = list(model.hook_dict)
        _, cache = model.run_with_cache(ids, names_filter=[*names, "blocks.1.ln1.hook_normalized"])
        x = cache["blocks.1.ln1.hook_normalized"]
        # the Lorsa's points come right after its input hook, in the forward order
        start = order.index("blocks.1.ln1.hook_normalized")
        assert order[start + 1 : start + 8] == [
            f"blocks.1.hook_attn_out.{h}"
            for h in (
                "hook_sae_input",
                "hook_lorsa_q",
                "hook_lorsa_k",
                "hook_lorsa_v",
                "hook_lorsa_pattern",
                "hook_sae_acts_pre",
                "hook_sae_acts_post",
            )
        ]
        held = cache[names[0]]
        torch.testing.assert_close(held, lorsa.pattern(x, 1), rtol=0, atol=1e-6)
        # another prompt run with this prompt's pattern held: its values mixed by the held pattern
        hold = [(names[0], lambda p, hook: held)]
        _, moved = model.run_with_cache(
            other, fwd_hooks=hold, names_filter=[*names, "blocks.1.ln1.hook_normalized"]
        )
    v = moved[names[1]]  # [batch, pos, head]
    want = lorsa.layer(1).mix(held, v)
    torch.testing.assert_close(moved[names[2]], want, rtol=0, atol=0)
    assert not torch.allclose(want, lorsa.encode(moved["blocks.1.ln1.hook_normalized"], 1)[0])


def test_the_complete_replacement_model_runs_lorsa_and_transcoders_as_by_hand():
    model, ids = _model(), tokens()
    lorsa, tc = _lorsa(), random_set(2, d_model=D_MODEL, activation="topk", k=4)
    with torch.no_grad():
        want = model.run_with_hooks(ids, fwd_hooks=lorsa_by_hand(lorsa) + replacement_hooks(tc))
        with spliced(model, [lorsa, tc]):
            got = model(ids)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        with model.saes([lorsa, tc]):
            assert torch.equal(model(ids), got)


def test_a_left_padded_batch_gives_each_sequence_what_it_gives_alone():
    model, lorsa = _model(), _lorsa()
    short, long = tokens(batch=1, pos=4, seed=1), tokens(batch=1, pos=7, seed=2)
    ids = torch.cat([torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1), long])  # [2, 7], left-padded
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1] * 7])
    with torch.no_grad(), spliced(model, lorsa):
        batch = model(ids, mask)
        alone = model(short)
        whole = model(long)
    torch.testing.assert_close(batch[0, 3:], alone[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batch[1], whole[0], rtol=1e-4, atol=1e-5)


def test_a_kv_cache_is_refused_and_generation_without_one_runs():
    model, lorsa = _model(), _lorsa()
    ids = tokens(batch=1, pos=4)
    with spliced(model, lorsa):
        with pytest.raises(ValueError, match="generate with use_kv_cache=False"):
            model.generate(ids, max_new_tokens=2, do_sample=False)
        out = model.generate(ids, max_new_tokens=2, do_sample=False, use_kv_cache=False).tokens
        assert out.shape == (1, 6)
        with torch.no_grad():
            assert int(model(out[:, :5])[0, -1].argmax()) == int(out[0, 5])
    assert lorsa.forward_tokens.valid is None
