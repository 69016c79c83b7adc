"""TopK codes decoded from their k active latents: the same numbers as the dense decode written out by hand,
for every shape and option that changes decoding, with hooks that read or edit the latents, and the error
term still exact when the hooked output is reused as the clean one."""

from __future__ import annotations

import pytest
import torch

from hooks import HookPoint
from interp.sae.activation import top_k
from interp.sae.latents import Active, Run
from tests.sae.models import random_sae, tiny_model, tokens

HOOK = "blocks.0.hook_resid_post"


def _dense_by_hand(sae, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(acts, output)`` of a TopK SAE on ``x [..., d_in]``, every step written out, the decoder dense."""
    sae_in = x - sae.b_dec if sae.cfg.apply_b_dec_to_input else x
    pre = sae_in @ sae.W_enc + sae.b_enc  # [..., d_sae]
    norms = sae.W_dec.norm(dim=-1)
    ranked = pre * norms if sae.cfg.rescale_acts_by_decoder_norm else pre
    values, indices = ranked.topk(sae.cfg.k, dim=-1)
    acts = torch.zeros_like(ranked).scatter(-1, indices, values.relu())
    scaled = acts / norms if sae.cfg.rescale_acts_by_decoder_norm else acts
    if sae.cfg.finetuning_scaling_factor:
        scaled = scaled * sae.finetuning_scaling_factor
    return acts, scaled @ sae.W_dec + sae.b_dec  # [..., d_out]


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 3, 4), (0, 4)])
@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"rescale_acts_by_decoder_norm": True},
        {"finetuning_scaling_factor": True},
        {
            "transcoder": True,
            "d_out": 24,
            "apply_b_dec_to_input": False,
            "hook_name_out": "blocks.0.hook_mlp_out",
        },
        {"k": 1},
        {"k": 48},
    ],
)
def test_topk_output_from_active_latents_equals_the_dense_decode_by_hand(shape, fields):
    sae = random_sae(HOOK, **fields)
    if sae.cfg.finetuning_scaling_factor:
        with torch.no_grad():
            sae.finetuning_scaling_factor.uniform_(0.5, 2.0)
    x = torch.randn(*shape, 16, generator=torch.Generator().manual_seed(3))
    acts, expected = _dense_by_hand(sae, x)
    out, run = sae.output(x)
    assert out.shape == (*shape, sae.d_out) and not run.edited and not run.dense
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sae(x), expected, atol=1e-5, rtol=1e-5)
    got_acts, got_out = sae.reconstruct(x)
    torch.testing.assert_close(got_acts, acts, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got_out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sae.encode(x), acts, atol=1e-6, rtol=1e-6)


def test_active_latents_decode_as_their_rows_weighted_and_scatter_into_the_dense_code():
    rows = torch.arange(12.0).reshape(4, 3)  # [d_sae=4, d_out=3]
    active = Active(torch.tensor([[2.0, 0.5], [0.0, 1.0]]), torch.tensor([[1, 3], [0, 2]]))
    torch.testing.assert_close(active.decode(rows), torch.stack([2 * rows[1] + 0.5 * rows[3], rows[2]]))
    assert active.to_dense(4).tolist() == [[0.0, 2.0, 0.0, 0.5], [0.0, 0.0, 1.0, 0.0]]
    relu = top_k(torch.tensor([[-1.0, -3.0, -2.0, 5.0]]), 2, rectify=True)
    assert sorted(relu.values[0].tolist()) == [0.0, 5.0] and set(relu.indices[0].tolist()) == {0, 3}


def test_a_hooked_run_notes_a_replacement_and_an_in_place_edit_but_not_a_reader():
    point, x = HookPoint(), torch.ones(3)
    assert point.idle
    through = Run(hooked=True)
    assert through(point, x) is x and not through.edited  # idle: nothing runs
    point.add_hook(lambda t, h: None)
    assert not point.idle and through(point, x) is x and not through.edited
    point.remove_hooks()
    point.add_hook(lambda t, h: t.mul_(2))
    assert through(point, x) is x and through.edited and x.tolist() == [2.0, 2.0, 2.0]
    point.remove_hooks()
    point.add_hook(lambda t, h: t + 1)
    again = Run(hooked=True)
    assert again(point, x).tolist() == [3.0, 3.0, 3.0] and again.edited
    with torch.inference_mode():  # no version counter to read: count it as changed, the safe side
        point.remove_hooks()
        point.add_hook(lambda t, h: None)
        blind = Run(hooked=True)
        blind(point, torch.ones(2))
        assert blind.edited


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_a_hook_editing_latents_changes_the_output_as_the_dense_decode_of_the_edit(in_place, grad):
    """Spliced without the error term, a hook that zeroes the two strongest latents of every token (in place
    or by returning a new tensor) gives the model the dense decode of the edited code, computed by hand."""
    model, ids = tiny_model(), tokens()
    sae = random_sae(HOOK)
    x = model.run_with_cache(ids, names_filter=HOOK)[1][HOOK]
    acts, _ = _dense_by_hand(sae, x)
    top2 = acts.topk(2, dim=-1).indices
    edited = acts.scatter(-1, top2, 0.0)
    expected = model.run_with_hooks(ids, fwd_hooks=[(HOOK, lambda a, h: edited @ sae.W_dec + sae.b_dec)])

    def zero_top2(a, hook):
        if in_place:
            a.scatter_(-1, a.topk(2, dim=-1).indices, 0.0)
            return None
        return a.scatter(-1, a.topk(2, dim=-1).indices, 0.0)

    with torch.set_grad_enabled(grad), model.saes([sae]):
        got = model.run_with_hooks(ids, fwd_hooks=[(f"{HOOK}.hook_sae_acts_post", zero_top2)])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "grad"])
def test_caching_the_latents_sees_the_dense_code_and_leaves_the_output_exact(mode):
    model, ids = tiny_model(), tokens()
    sae = random_sae(HOOK)
    clean = model(ids)
    x = model.run_with_cache(ids, names_filter=HOOK)[1][HOOK]
    acts, recons = _dense_by_hand(sae, x)
    context = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode, "grad": torch.enable_grad}
    with context[mode](), model.saes([sae], use_error_term=True):
        logits, cache = model.run_with_cache(
            ids, names_filter=[f"{HOOK}.hook_sae_acts_post", f"{HOOK}.*error"]
        )
    assert torch.equal(logits, clean)  # the same bits as the model alone
    assert cache[f"{HOOK}.hook_sae_acts_post"].shape == (*ids.shape, sae.d_sae)
    torch.testing.assert_close(cache[f"{HOOK}.hook_sae_acts_post"], acts, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(cache[f"{HOOK}.hook_sae_error"], x - recons, atol=1e-5, rtol=1e-5)
    with context[mode](), model.saes([sae]):
        without, plain_cache = model.run_with_cache(ids, names_filter=f"{HOOK}.hook_sae_acts_post")
    expected = model.run_with_hooks(ids, fwd_hooks=[(HOOK, lambda a, h: recons)])
    torch.testing.assert_close(without, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(plain_cache[f"{HOOK}.hook_sae_acts_post"], cache[f"{HOOK}.hook_sae_acts_post"])


def test_the_dense_code_is_decoded_only_after_an_edit_or_while_autograd_records():
    sae = random_sae(HOOK)
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(5))
    read = ("hook_sae_acts_post", lambda a, h: None)
    zero = ("hook_sae_acts_post", lambda a, h: torch.zeros_like(a))
    with torch.no_grad():
        with sae.hooks([read]):
            out, run = sae.output(x)
        assert not run.dense and not run.edited and torch.equal(out, sae.output(x)[0])
        with sae.hooks([zero]):
            out, run = sae.output(x)
        assert run.dense and run.edited
        torch.testing.assert_close(out, sae.b_dec.expand(3, 16))
    with sae.hooks([read]):
        out, run = sae.output(x)
    assert run.dense and not run.edited and out.requires_grad
    assert torch.equal(out, sae.output(x, hooked=False, dense=True)[0])


def test_a_point_with_only_a_torch_module_hook_is_not_idle():
    point, seen = HookPoint(), []
    handle = point.register_forward_hook(lambda module, args, out: seen.append(out))
    assert not point.idle
    Run(hooked=True)(point, torch.ones(2))
    assert len(seen) == 1 and seen[0].tolist() == [1.0, 1.0]
    handle.remove()
    assert point.idle
