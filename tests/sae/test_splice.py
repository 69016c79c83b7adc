"""Splicing SAEs into a model: exact with the error term, the model on the reconstruction without it, hooks
under the model's names, composition with run_with_hooks / patch / attribution_patch, and exact cleanup."""

from __future__ import annotations

import pytest
import torch

from hooks.names import UnknownHookError
from interp.analysis import attribution_patch, patch
from interp.sae import SAE, SAE_HOOKS, SAEConfig
from tests.sae.models import random_sae, tiny_model, tokens

HOOK = "blocks.0.hook_resid_post"


def _reference_cache(model, ids, name):
    return model.run_with_cache(ids, names_filter=name)[1][name]


def test_error_term_leaves_logits_unchanged_exactly_and_caches_every_sae_hook():
    model, ids = tiny_model(), tokens()
    sae = random_sae(HOOK)
    clean = model(ids)
    before = list(model.hook_dict.items())
    with model.saes([sae], use_error_term=True):
        logits, cache = model.run_with_cache(ids, names_filter=f"{HOOK}.*")
        assert torch.equal(logits, clean)
        assert torch.equal(model(ids), clean)  # nothing observing: the same bits too
    assert list(model.hook_dict.items()) == before
    b, p = ids.shape
    shapes = {name.rsplit(".", 1)[1]: tuple(t.shape) for name, t in cache.items()}
    assert shapes == {
        "hook_sae_input": (b, p, 16),
        "hook_sae_acts_pre": (b, p, 48),
        "hook_sae_acts_post": (b, p, 48),
        "hook_sae_recons": (b, p, 16),
        "hook_sae_error": (b, p, 16),
        "hook_sae_output": (b, p, 16),
    }
    x = _reference_cache(model, ids, HOOK)
    torch.testing.assert_close(cache[f"{HOOK}.hook_sae_input"], x, rtol=0, atol=0)
    acts = sae.encode(x)
    torch.testing.assert_close(cache[f"{HOOK}.hook_sae_acts_post"], acts)
    torch.testing.assert_close(cache[f"{HOOK}.hook_sae_error"], x - sae.decode(acts))
    assert (cache[f"{HOOK}.hook_sae_acts_post"] != 0).sum(-1).max() <= 6


def test_without_error_term_logits_are_the_model_on_the_reconstruction():
    model, ids = tiny_model(), tokens()
    sae = random_sae(HOOK)
    x = _reference_cache(model, ids, HOOK)
    expected = model.run_with_hooks(ids, fwd_hooks=[(HOOK, lambda a, h: sae(x))])
    with model.saes(sae):
        assert f"{HOOK}.hook_sae_error" not in model.hook_dict  # no error term, no error node
        torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    torch.testing.assert_close(model.run_with_saes(ids, saes=[sae]), expected, rtol=0, atol=0)
    assert not torch.allclose(expected, model(ids))


def test_the_error_is_a_node_to_patch_and_features_to_edit():
    model, ids = tiny_model(), tokens()
    sae = random_sae(HOOK)
    no_error = model.run_with_saes(ids, saes=[sae])
    with model.saes([sae], use_error_term=True):
        zeroed = model.run_with_hooks(
            ids, fwd_hooks=[(f"{HOOK}.hook_sae_error", lambda e, h: torch.zeros_like(e))]
        )
        torch.testing.assert_close(zeroed, no_error, atol=1e-5, rtol=1e-5)
        x = _reference_cache(model, ids, HOOK)
        acts = sae.encode(x)
        f = int(acts.flatten(0, 1).ne(0).sum(0).argmax())

        def ablate(a, h):
            a = a.clone()
            a[..., f] = 0
            return a

        edited = model.run_with_hooks(ids, fwd_hooks=[(f"{HOOK}.hook_sae_acts_post", ablate)])
    ablated = acts.clone()
    ablated[..., f] = 0
    target = x - (acts[..., f : f + 1] * sae.W_dec[f])  # the feature's write removed, error kept
    expected = model.run_with_hooks(ids, fwd_hooks=[(HOOK, lambda a, h: target)])
    torch.testing.assert_close(edited, expected, atol=1e-5, rtol=1e-5)


def test_several_saes_hooks_order_and_user_hooks_see_the_sae_output():
    model, ids = tiny_model(), tokens()
    a, b = random_sae("blocks.0.hook_resid_pre", seed=1), random_sae("blocks.1.hook_mlp_out", seed=2)
    seen = {}
    with model.saes([a, b]):
        names = model.hook_names()
        i = names.index("blocks.0.hook_resid_pre")
        assert names[i + 1 : i + 6] == [
            f"blocks.0.hook_resid_pre.{h}" for h in SAE_HOOKS if h != "hook_sae_error"
        ]
        _, cache = model.run_with_cache(
            ids, names_filter=["blocks.0.hook_resid_pre", "blocks.*.hook_sae_output"]
        )
        model.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_mlp_out", lambda t, h: seen.setdefault("t", t))])
        assert cache.n_layers == 2 and model.hook_dict["blocks.1.hook_mlp_out.hook_sae_acts_post"].layer == 1
    torch.testing.assert_close(
        cache["blocks.0.hook_resid_pre"], cache["blocks.0.hook_resid_pre.hook_sae_output"]
    )
    assert "blocks.1.hook_mlp_out.hook_sae_output" in cache
    with pytest.raises(ValueError, match="both replace"):
        with model.saes([a, random_sae("blocks.0.hook_resid_pre", seed=3)]):
            pass


def test_detach_on_error_restores_the_model_exactly():
    model, ids = tiny_model(), tokens()
    sae = random_sae(HOOK)
    names = list(model.hook_dict)
    fns = {n: list(p.fwd_fns) for n, p in model.hook_dict.items()}
    with pytest.raises(RuntimeError, match="boom"):
        with model.saes([sae], use_error_term=True):
            raise RuntimeError("boom")
    assert list(model.hook_dict) == names and all(model.hook_dict[n].fwd_fns == fns[n] for n in names)
    assert sae.hook_sae_input.name == "hook_sae_input"
    assert torch.equal(model(ids), model(ids))
    with pytest.raises(UnknownHookError, match="did you mean 'blocks.0.hook_resid_post'"):
        with model.saes([random_sae("blocks.0.hook_resid_pst")]):
            pass
    with pytest.raises(ValueError, match="d_in=8.*width 16"):
        with model.saes([random_sae(HOOK, d_in=8)]):
            pass
    assert list(model.hook_dict) == names


def test_patch_and_attribution_patch_reach_features_and_error():
    model = tiny_model()
    clean, corrupt = tokens(2, 6, seed=1), tokens(2, 6, seed=2)
    sae = random_sae(HOOK)

    def metric(logits, batch):
        return logits[:, -1, 3] - logits[:, -1, 5]

    nodes = [f"{HOOK}.hook_sae_acts_post", f"{HOOK}.hook_sae_error"]
    plain = patch(model, clean, corrupt, HOOK, metric, by="layer")
    with model.saes([sae], use_error_term=True):
        exact = patch(model, clean, corrupt, nodes + [HOOK], metric, by="layer")
        approx = attribution_patch(model, clean, corrupt, metric, nodes, by="layer")
    # Patching the stream inside the splice is patching the stream: the same as without the SAE.
    torch.testing.assert_close(
        torch.tensor(exact.set_index("hook").loc[HOOK, "delta"]),
        torch.tensor(plain["delta"].iloc[0]),
        atol=1e-5,
        rtol=1e-5,
    )
    # Patching features and error together recovers everything; attribution splits the same total linearly.
    with model.saes([sae], use_error_term=True):
        both = patch(model, clean, corrupt, nodes, metric, by="layer")
    assert set(both["hook"]) == set(nodes)
    # Attribution to features plus error adds up to attribution to the stream itself (the decoder is linear).
    stream = attribution_patch(model, clean, corrupt, metric, HOOK, by="layer")
    torch.testing.assert_close(
        torch.tensor(approx["delta"].sum()), torch.tensor(stream["delta"].iloc[0]), atol=1e-4, rtol=1e-4
    )


def test_transcoder_reads_one_hook_and_replaces_another():
    model, ids = tiny_model(), tokens()
    tc = random_sae(
        "blocks.1.ln2.hook_normalized",
        architecture="standard",
        transcoder=True,
        apply_b_dec_to_input=False,
        hook_name_out="blocks.1.hook_mlp_out",
    )
    _, cache = model.run_with_cache(
        ids, names_filter=["blocks.1.ln2.hook_normalized", "blocks.1.hook_mlp_out"]
    )
    pred = tc(cache["blocks.1.ln2.hook_normalized"])
    expected = model.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_mlp_out", lambda a, h: pred)])
    torch.testing.assert_close(model.run_with_saes(ids, saes=[tc]), expected, atol=1e-6, rtol=1e-6)
    with model.saes([tc], use_error_term=True):
        logits, c = model.run_with_cache(ids, names_filter="blocks.1.hook_mlp_out.*")
    # Reading the input hook makes the norm take its explicit path (as any hook on it does), so the reference
    # is the model with that hook observed; against it the outputs are the same bits.
    observed = model.run_with_hooks(ids, fwd_hooks=[("blocks.1.ln2.hook_normalized", lambda a, h: None)])
    assert torch.equal(logits, observed)
    torch.testing.assert_close(logits, model(ids), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        c["blocks.1.hook_mlp_out.hook_sae_error"], cache["blocks.1.hook_mlp_out"] - pred, atol=1e-6, rtol=1e-6
    )


def test_a_decoding_loop_with_the_splice_sees_each_position_as_a_full_forward_does():
    """Greedy decoding by repeated forwards with the SAE spliced: each step's last position equals the same
    position of one forward over the final sequence (a position-wise dictionary, a causal model)."""
    model, ids = tiny_model(), tokens(1, 4)
    sae = random_sae(HOOK)
    with model.saes([sae]):
        seq = ids
        steps = []
        for _ in range(4):
            logits = model(seq)
            steps.append(logits[0, -1])
            seq = torch.cat([seq, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        full = model(seq[:, :-1])
    torch.testing.assert_close(torch.stack(steps), full[0, 3:], atol=1e-5, rtol=1e-5)


def test_hook_z_sae_flattens_heads():
    model, ids = tiny_model(), tokens()
    sae = random_sae("blocks.0.attn.hook_z", reshape_activations="hook_z")
    with model.saes([sae], use_error_term=True):
        logits, cache = model.run_with_cache(ids, names_filter="blocks.0.attn.hook_z.*")
    assert torch.equal(logits, model(ids))
    assert cache["blocks.0.attn.hook_z.hook_sae_input"].shape == (3, 7, 16)
    assert cache["blocks.0.attn.hook_z.hook_sae_output"].shape == (3, 7, 2, 8)
    assert isinstance(sae, SAE) and SAEConfig


def test_gradients_through_the_error_term_splice_are_the_models_own():
    model, ids = tiny_model(), tokens()
    sae = random_sae(HOOK)

    def grad_of_embed(observe: bool):
        grabbed = {}

        def keep(x, hook):
            x = x.detach().requires_grad_(True)
            grabbed["x"] = x
            return x

        hooks = [("hook_embed", keep)]
        if observe:
            hooks.append((f"{HOOK}.hook_sae_acts_post", lambda a, h: None))
        out = model.run_with_hooks(ids, fwd_hooks=hooks)
        return torch.autograd.grad(out[:, -1, 3].sum(), grabbed["x"])[0]

    plain = grad_of_embed(False)
    with model.saes([sae], use_error_term=True):
        torch.testing.assert_close(grad_of_embed(True), plain, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("use_error_term", [False, True])
def test_generate_with_the_splice_matches_decoding_by_hand(use_error_term):
    """``model.generate`` inside ``model.saes``: with the KV cache each step runs only the new position through
    the SAE, and the tokens are the ones greedy decoding by full forwards gives; with the error term they are
    the model's own."""
    model, ids = tiny_model(), tokens(1, 4)
    sae = random_sae(HOOK)
    plain = model.generate(ids, 6, stop_at_eos=False).new_tokens[0]
    with model.saes([sae], use_error_term=use_error_term):
        cached = model.generate(ids, 6, stop_at_eos=False).new_tokens[0]
        uncached = model.generate(ids, 6, stop_at_eos=False, use_kv_cache=False).new_tokens[0]
        seq = ids
        for _ in range(6):
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    by_hand = seq[0, 4:].tolist()
    assert cached == uncached == by_hand
    assert (cached == plain) == use_error_term  # without the error term the reconstruction changes the text
    assert model.hook_names() == tiny_model().hook_names()  # detached after generating
