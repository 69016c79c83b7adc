"""The replacement model: transcoders spliced in place of the MLPs, checked against a forward done by hand."""

from __future__ import annotations

import pytest
import torch

from hooks.names import UnknownHookError
from interp.dictionary import sources
from tests.sae.models import tiny_model, tokens
from tests.sae.transcoder.factories import random_clt, random_set, replacement_hooks

KINDS = {
    "set": lambda **kw: random_set(activation="topk", k=4, **kw),
    "skip-set": lambda **kw: random_set(activation="relu", skip=True, **kw),
    "clt": lambda **kw: random_clt(activation="jumprelu", **kw),
    "skip-clt": lambda **kw: random_clt(activation="relu", skip=True, **kw),
}


def _by_hand(model, tc, ids, edit=None):
    """The replacement model's logits by hand: at each output hook, the reconstruction from the inputs seen."""
    return model.run_with_hooks(ids, fwd_hooks=replacement_hooks(tc, edit))


@pytest.mark.parametrize("kind", list(KINDS))
def test_without_the_error_term_the_model_runs_on_the_reconstructions(kind):
    model, tc, ids = tiny_model(), KINDS[kind](), tokens()
    clean = model(ids)
    with torch.no_grad():
        with model.transcoders(tc):
            logits, cache = model.run_with_cache(ids, names_filter="*.hook_sae_*")
        want = _by_hand(model, tc, ids)
    torch.testing.assert_close(logits, want)
    assert not torch.allclose(logits, clean)
    names = list(cache)
    for layer in tc.layers:
        out = tc.output_hook(layer)
        pre, acts = tc.encode(cache[f"{out}.hook_sae_input"], layer)
        torch.testing.assert_close(cache[f"{out}.hook_sae_acts_post"], acts)
        torch.testing.assert_close(cache[f"{out}.hook_sae_acts_pre"], pre)
        torch.testing.assert_close(cache[f"{out}.hook_sae_output"], cache[f"{out}.hook_sae_recons"])
        assert names.index(f"{out}.hook_sae_acts_post") < names.index(f"{out}.hook_sae_recons")
    assert f"{tc.output_hook(0)}.hook_sae_error" not in cache


@pytest.mark.parametrize("kind", list(KINDS))
def test_with_the_error_term_outputs_are_unchanged_and_the_model_is_restored(kind):
    model, tc, ids = tiny_model(), KINDS[kind](), tokens()
    before = list(model.hook_dict.items())
    clean = model(ids)
    # The splice reads the input hooks, which puts a norm on its explicit path: compare with the same path.
    observe = [(tc.input_hook(layer), lambda x, h: None) for layer in tc.layers]
    explicit = model.run_with_hooks(ids, fwd_hooks=observe)
    torch.testing.assert_close(explicit, clean)
    with model.transcoders(tc, error=True):
        assert torch.equal(model(ids), explicit)
        logits, cache = model.run_with_cache(ids, names_filter="*.hook_sae_*")
        assert torch.equal(logits, explicit)
    out = tc.output_hook(1)
    recons, err = cache[f"{out}.hook_sae_recons"], cache[f"{out}.hook_sae_error"]
    _, mlp = model.run_with_cache(ids, names_filter=out, fwd_hooks=observe)
    torch.testing.assert_close(recons + err, mlp[out])
    assert list(model.hook_dict.items()) == before
    assert all(not p.fwd_fns and not p.pinned for p in model.hook_dict.values())
    assert torch.equal(model(ids), clean)


@pytest.mark.parametrize("kind", ["set", "clt"])
def test_edited_features_reach_every_layer_they_write(kind):
    model, tc, ids = tiny_model(), KINDS[kind](), tokens()

    def ablate(acts, hook):
        acts = acts.clone()
        acts[..., :5] = 0
        return acts

    with torch.no_grad():
        with model.transcoders(tc, error=True):
            logits = model.run_with_hooks(
                ids, fwd_hooks=[(f"{tc.output_hook(0)}.hook_sae_acts_post", ablate)]
            )
        # By hand: each layer's output is its MLP output, minus the reconstruction from unedited features,
        # plus the reconstruction from edited ones (layer 0's features ablated).
        inputs = {}

        def read(layer):
            return lambda x, h: inputs.__setitem__(layer, x.clone())

        def write(layer):
            def fn(x, h):
                acts = {s: tc.encode(inputs[s], s)[1] for s in sources(tc, layer)}
                edited = {s: ablate(a, None) if s == 0 else a for s, a in acts.items()}
                return x - tc.decode(acts, layer) + tc.decode(edited, layer)

            return fn

        hooks = []
        for layer in tc.layers:
            hooks += [(tc.input_hook(layer), read(layer)), (tc.output_hook(layer), write(layer))]
        want = model.run_with_hooks(ids, fwd_hooks=hooks)
    torch.testing.assert_close(logits, want)
    assert not torch.allclose(logits, model(ids))


def test_transcoders_that_do_not_fit_the_model_are_refused_before_running():
    model = tiny_model()
    with pytest.raises(
        ValueError, match="d_in=8 at .blocks.0.ln2.hook_normalized., but that hook of this model has width 16"
    ):
        with model.transcoders(random_set(d_model=8)):
            pass
    with pytest.raises(
        ValueError, match="CrossLayerTranscoder has features at layers up to 2, the model has n_layers=2"
    ):
        with model.transcoders(random_clt(3)):
            pass
    with pytest.raises(ValueError, match="features at layers up to 2, the model has n_layers=2"):
        with model.transcoders(random_set(3)):
            pass
    with pytest.raises(UnknownHookError, match="input hook.*did you mean"):
        with model.transcoders(random_set(input_site="ln2.hook_normalised")):
            pass
    with pytest.raises(ValueError, match="which the forward reaches after the hook it writes"):
        with model.transcoders(random_set(input_site="hook_resid_post")):
            pass
    assert all(not p.fwd_fns for p in model.hook_dict.values())


def test_the_error_node_receives_the_outputs_gradient():
    model, tc, ids = tiny_model(), KINDS["clt"](), tokens()
    grads = {}

    def keep(grad, hook):
        grads[hook.name] = grad.clone()

    out = tc.output_hook(1)
    names = [f"{out}.hook_sae_error", f"{out}.hook_sae_output", f"{tc.output_hook(0)}.hook_sae_acts_post"]
    with model.transcoders(tc, error=True):
        with model.hooks(bwd_hooks=[(name, keep) for name in names]):
            model(ids).logsumexp(-1).sum().backward()
    assert set(grads) == set(names)
    torch.testing.assert_close(grads[f"{out}.hook_sae_error"], grads[f"{out}.hook_sae_output"])
    assert grads[f"{tc.output_hook(0)}.hook_sae_acts_post"].abs().sum() > 0
