"""Steering and SAE splicing on a mixture-of-experts model (a tiny Mixtral): the edited interp run against the
reference with the same edit made by a PyTorch hook on its own modules, so the routing of later layers reacts
to the edit in both."""

from __future__ import annotations

import torch

from interp.analysis import steer
from tests.analysis.moe_models import pair, tokens
from tests.sae.models import random_sae

ATOL = 1e-5  # the families' parity tolerance on logits


def _reference_logits(reference, ids, module, hook, pre: bool = False):
    register = module.register_forward_pre_hook if pre else module.register_forward_hook
    handle = register(hook)
    try:
        with torch.no_grad():
            return reference(input_ids=ids).logits
    finally:
        handle.remove()


def _routing(model, ids, fwd_hooks=()):
    with torch.no_grad():
        _, cache = model.run_with_cache(
            ids, names_filter="blocks.1.mlp.hook_expert_indices", fwd_hooks=fwd_hooks
        )
    return cache["blocks.1.mlp.hook_expert_indices"]


def test_steering_the_moe_output_and_the_stream():
    reference, model = pair("mixtral")
    ids = tokens(2, 6)
    vector = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(3))
    at_mlp = [("blocks.0.hook_mlp_out", steer(vector, 3.0))]
    with torch.no_grad():
        ours = model.run_with_hooks(ids, fwd_hooks=at_mlp)
    expected = _reference_logits(
        reference, ids, reference.model.layers[0].mlp, lambda m, i, out: out + 3.0 * vector
    )
    torch.testing.assert_close(ours, expected, atol=ATOL, rtol=ATOL)
    assert not torch.equal(_routing(model, ids, at_mlp), _routing(model, ids))  # the next router reacts

    at_resid = [("blocks.1.hook_resid_pre", steer(vector, -2.0, positions=[1, 4]))]
    with torch.no_grad():
        ours = model.run_with_hooks(ids, fwd_hooks=at_resid)

    def add(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        hidden = hidden.clone()
        hidden[:, [1, 4]] -= 2.0 * vector
        if args:
            return (hidden, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": hidden}

    handle = reference.model.layers[1].register_forward_pre_hook(add, with_kwargs=True)
    try:
        with torch.no_grad():
            expected = reference(input_ids=ids).logits
    finally:
        handle.remove()
    torch.testing.assert_close(ours, expected, atol=ATOL, rtol=ATOL)
    with torch.no_grad():
        assert (ours - model(ids)).abs().max() > 0.1


def test_an_sae_spliced_at_the_moe_output():
    reference, model = pair("mixtral")
    ids = tokens(2, 6)
    hook = "blocks.0.hook_mlp_out"
    sae = random_sae(hook, d_in=model.cfg.d_model, d_sae=96, k=8)
    with torch.no_grad():
        clean = model(ids)
        with model.saes(sae, use_error_term=True):
            kept, cache = model.run_with_cache(ids, names_filter=f"{hook}.*")
        torch.testing.assert_close(kept, clean, atol=ATOL, rtol=ATOL)  # the error term restores the output
        _, plain = model.run_with_cache(ids, names_filter=hook)
        torch.testing.assert_close(cache[f"{hook}.hook_sae_input"], plain[hook], atol=0, rtol=0)
        torch.testing.assert_close(cache[f"{hook}.hook_sae_acts_post"], sae.encode(plain[hook]))
        with model.saes(sae):
            replaced = model(ids)
    expected = _reference_logits(reference, ids, reference.model.layers[0].mlp, lambda m, i, out: sae(out))
    torch.testing.assert_close(replaced, expected, atol=ATOL, rtol=ATOL)
    assert (replaced - clean).abs().max() > 0.1
