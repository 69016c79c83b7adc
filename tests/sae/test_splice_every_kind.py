"""One splice for every dictionary: SAEs and transcoders together, SAEs by layer as one dictionary, and the
old transcoder name; checked against forwards done by hand."""

from __future__ import annotations

import pytest
import torch

from interp.sae import SAESet, spliced, spliced_transcoders
from tests.sae.models import random_sae, tiny_model, tokens
from tests.sae.transcoder.factories import random_clt, random_set, replacement_hooks

SAE_HOOK = "blocks.0.hook_resid_pre"


@pytest.mark.parametrize("make", [lambda: random_set(activation="topk", k=4), lambda: random_clt(skip=True)])
def test_an_sae_and_transcoders_spliced_together_run_as_both_by_hand(make):
    model, ids = tiny_model(), tokens()
    sae, tc = random_sae(SAE_HOOK), make()
    by_hand = [(SAE_HOOK, lambda a, hook: sae(a)), *replacement_hooks(tc)]
    with torch.no_grad():
        want = model.run_with_hooks(ids, fwd_hooks=by_hand)
        with spliced(model, [sae, tc]):
            got = model(ids)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(got, model(ids))
        with spliced(model, [sae, tc], use_error_term=True):
            logits, cache = model.run_with_cache(ids, names_filter=["*.hook_sae_error"])
    # Nothing edited: the model's own bits, as it runs with the transcoders' input hooks read (a norm's
    # hook_normalized observed takes the norm's explicit path).
    observed = model.run_with_hooks(ids, fwd_hooks=[(tc.input_hook(i), lambda a, hook: None) for i in (0, 1)])
    assert torch.equal(logits, observed)
    assert set(cache) == {f"{SAE_HOOK}.hook_sae_error"} | {
        f"{tc.output_hook(i)}.hook_sae_error" for i in (0, 1)
    }


def test_saes_at_two_layers_as_one_dictionary_splice_as_the_two_saes():
    model, ids = tiny_model(), tokens()
    saes = [random_sae(SAE_HOOK), random_sae("blocks.1.hook_mlp_out", seed=2)]
    with torch.no_grad():
        with model.saes(saes):
            want = model(ids)
        with model.saes(SAESet(saes)):
            got = model(ids)
    assert torch.equal(got, want)
    with torch.no_grad():
        x = model.run_with_cache(ids, names_filter=SAE_HOOK)[1][SAE_HOOK]
        with model.saes(SAESet(saes)):
            _, cache = model.run_with_cache(ids, names_filter=f"{SAE_HOOK}.hook_sae_acts_post")
    torch.testing.assert_close(cache[f"{SAE_HOOK}.hook_sae_acts_post"], saes[0].encode(x))


def test_two_dictionaries_writing_one_hook_and_one_that_cannot_splice_are_refused():
    model = tiny_model()
    with pytest.raises(ValueError, match="dictionaries 0 and 1 both replace 'blocks.0.hook_mlp_out'"):
        with spliced(model, [random_set(), random_sae("blocks.0.hook_mlp_out")]):
            pass

    class Bare:  # the protocol's methods, none of what a splice needs
        layers, d_in, d_out = [0], 16, 16

        def __getattr__(self, name):
            if name in ("device", "hook_points", "hooked_encode", "hooked_decode"):
                raise AttributeError(name)
            return lambda *a, **k: None

    with pytest.raises(
        TypeError, match="cannot be spliced: it lacks hook_points, hooked_encode, hooked_decode"
    ):
        with spliced(model, Bare()):
            pass
    assert all(not p.fwd_fns for p in model.hook_dict.values())


def test_the_old_transcoder_name_warns_and_splices_the_same():
    model, ids, tc = tiny_model(), tokens(), random_clt()
    with torch.no_grad(), model.transcoders(tc):
        want = model(ids)
    with pytest.warns(DeprecationWarning, match="spliced_transcoders is interp.sae.spliced now"):
        context = spliced_transcoders(model, tc)
    with torch.no_grad(), context:
        assert torch.equal(model(ids), want)
