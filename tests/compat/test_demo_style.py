"""Code written the way TransformerLens's demos use the library runs unchanged on the compat layer.

Written for this project in the demos' style (load, get_act_name, run_with_cache, cache methods, FactoredMatrix,
return_type="loss", persistent hooks, token helpers); only the model name differs. Each step's numbers are
checked against TransformerLens's own on the same weights and tokens (``demo.*`` in the golden file, written by
``golden/make_golden.py``), besides the identities the steps must keep.
"""

from __future__ import annotations

from functools import partial

import torch
from torch.testing import assert_close

import interp.compat.transformer_lens as transformer_lens
from tests.compat.models import CHECKPOINT, golden

G = golden()
TOL = dict(atol=2e-5, rtol=1e-5)  # as in test_golden.py

utils = transformer_lens.utils
FactoredMatrix = transformer_lens.FactoredMatrix
HookedTransformer = transformer_lens.HookedTransformer


def test_a_notebook_in_transformer_lens_style():
    torch.set_grad_enabled(False)
    try:
        _notebook()
    finally:
        torch.set_grad_enabled(True)


def _notebook():
    device = utils.get_device()
    model = HookedTransformer.from_pretrained(CHECKPOINT, device="cpu")
    assert device.type in ("cpu", "cuda", "mps") and model.cfg.device == torch.device("cpu")

    assert torch.equal(model.to_tokens("The cat sat on the mat."), G["demo.loss_tokens"])
    loss = model("The cat sat on the mat.", return_type="loss")
    assert_close(loss, G["demo.loss"], **TOL)

    clean_prompt = "After John and Mary went to the store, Mary gave a bottle of milk to"
    corrupted_prompt = "After John and Mary went to the store, John gave a bottle of milk to"
    clean_tokens = model.to_tokens(clean_prompt)
    corrupted_tokens = model.to_tokens(corrupted_prompt)

    def logits_to_logit_diff(logits, correct_answer=" John", incorrect_answer=" Mary"):
        correct_index = model.to_single_token(correct_answer)
        incorrect_index = model.to_single_token(incorrect_answer)
        return logits[0, -1, correct_index] - logits[0, -1, incorrect_index]

    assert torch.equal(clean_tokens, G["demo.clean_tokens"])
    assert torch.equal(corrupted_tokens, G["demo.corrupted_tokens"])
    clean_logits, clean_cache = model.run_with_cache(clean_tokens)
    clean_logit_diff = logits_to_logit_diff(clean_logits)
    assert_close(clean_logit_diff, G["demo.clean_logit_diff"], **TOL)
    corrupted_logit_diff = logits_to_logit_diff(model(corrupted_tokens))

    # Patch the residual stream at each layer and position (TransformerLens 3's canonical name, "in").
    def residual_stream_patching_hook(resid_pre, hook, position):
        resid_pre[:, position, :] = clean_cache[hook.name][:, position, :]
        return resid_pre

    num_positions = len(clean_tokens[0])
    results = torch.zeros((model.cfg.n_layers, num_positions), device=model.cfg.device)
    for layer in range(model.cfg.n_layers):
        for position in range(num_positions):
            patched_logits = model.run_with_hooks(
                corrupted_tokens,
                fwd_hooks=[
                    (
                        utils.get_act_name("in", layer),
                        partial(residual_stream_patching_hook, position=position),
                    )
                ],
            )
            results[layer, position] = (logits_to_logit_diff(patched_logits) - corrupted_logit_diff) / (
                clean_logit_diff - corrupted_logit_diff
            )
    assert_close(results, G["demo.patching"], **TOL)
    # patching the only differing token restores the clean run; the earlier positions are the same tokens
    assert_close(results[0, :11], torch.tensor([0.0] * 10 + [1.0]), **TOL)

    # Direct logit attribution from the cache methods.
    answer_residual_directions = model.tokens_to_residual_directions(
        " John"
    ) - model.tokens_to_residual_directions(" Mary")
    accumulated_residual, labels = clean_cache.accumulated_resid(
        layer=-1, incl_mid=True, pos_slice=-1, return_labels=True
    )
    scaled = clean_cache.apply_ln_to_stack(accumulated_residual, layer=-1, pos_slice=-1)
    assert labels[-1] == "final_post" and scaled.shape == (5, 1, model.cfg.d_model)
    per_head = clean_cache.stack_head_results(layer=-1, pos_slice=-1)
    per_head_attrs = clean_cache.logit_attrs(per_head, " John", " Mary", pos_slice=-1)
    assert_close(per_head_attrs, G["demo.per_head_attrs"], **TOL)
    assert_close(
        per_head_attrs, clean_cache.apply_ln_to_stack(per_head, -1, pos_slice=-1) @ answer_residual_directions
    )
    parts = clean_cache.decompose_resid(layer=-1, pos_slice=-1)
    biases = model.ln_final.b @ answer_residual_directions + model.b_U[model.to_single_token(" John")]
    biases = biases - model.b_U[model.to_single_token(" Mary")]
    sublayer_attrs = clean_cache.logit_attrs(parts, " John", " Mary", pos_slice=-1)
    assert_close(sublayer_attrs, G["demo.sublayer_attrs"], **TOL)
    assert_close(sublayer_attrs.sum(0)[0] + biases, clean_logit_diff, **TOL)

    # Attention patterns: induction scores with a persistent hook and hook.layer().
    induction_score_store = torch.zeros((model.cfg.n_layers, model.cfg.n_heads), device=model.cfg.device)
    seq_len = 6
    repeated_tokens = G[
        "demo.repeated_tokens"
    ]  # random ids 1..59, six of them twice, as the golden drew them

    def induction_score_hook(pattern, hook):
        induction_stripe = pattern.diagonal(dim1=-2, dim2=-1, offset=1 - seq_len)
        induction_score_store[hook.layer(), :] = induction_stripe.mean((0, -1))

    for layer in range(model.cfg.n_layers):
        model.blocks[layer].attn.hook_pattern.add_hook(induction_score_hook)
    model(repeated_tokens, return_type=None)
    model.reset_hooks()
    assert_close(induction_score_store, G["demo.induction_scores"], **TOL)
    _, pattern_cache = model.run_with_cache(
        repeated_tokens, names_filter=lambda name: name.endswith("pattern")
    )
    for layer in range(model.cfg.n_layers):
        stripe = pattern_cache["pattern", layer].diagonal(dim1=-2, dim2=-1, offset=1 - seq_len)
        assert_close(induction_score_store[layer], stripe.mean((0, -1)))

    # Per-token loss on repeated tokens, and the OV circuit's copying score.
    per_token = model.loss_fn(model(repeated_tokens), repeated_tokens, per_token=True)
    assert_close(per_token, G["demo.repeated_loss_per_token"], **TOL)
    ov = model.OV
    assert isinstance(ov, FactoredMatrix) and ov.shape == (2, 4, 32, 32)
    eigenvalues = ov.eigenvalues
    copying = eigenvalues.sum(-1).real / eigenvalues.abs().sum(-1)
    assert_close(copying, G["demo.ov_copying"], **TOL)
    full_ov = model.embed.W_E @ ov @ model.unembed.W_U
    assert_close(utils.get_corner(full_ov[1, 2], 3), G["demo.full_ov_corner"], **TOL)
    assert_close(
        full_ov[1, 2].AB, model.W_E @ model.W_V[1, 2] @ model.W_O[1, 2] @ model.W_U, atol=1e-4, rtol=1e-4
    )
    assert_close(utils.get_corner(full_ov[0, 0], 3), (full_ov[0, 0].AB)[:3, :3], atol=1e-5, rtol=1e-5)

    # Token helpers.
    mary = model.to_single_token(" Mary")
    assert model.get_token_position(" Mary", clean_prompt, mode="last") == 10 and clean_tokens[0, 10] == mary
    assert model.get_token_position(" Mary", clean_prompt, mode="first") == 4 and clean_tokens[0, 4] == mary
    assert model.to_string(clean_tokens[0, 1:5]) == "After John and Mary"
    assert model.to_str_tokens(clean_tokens)[4] == " Mary"
    assert utils.to_numpy(clean_logit_diff).shape == ()
