"""The compat layer gives TransformerLens 3's numbers on the same random GPT-2-shaped weights.

Golden values come from ``golden/make_golden.py`` run with TransformerLens 3.9.0 (unprocessed, and with its
default processing: fold LayerNorm, centre writing weights and the unembedding, fold value biases).
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import interp.compat.transformer_lens as transformer_lens
from tests.compat.models import GOLDEN, golden, golden_labels, tl_model

G = golden()
LABELS = golden_labels()
TOKENS = G["tokens"]
CORRECT, INCORRECT = 42, 17
TOL = dict(atol=2e-5, rtol=1e-5)

STACKS = {
    "accumulated": lambda c: c.accumulated_resid(incl_mid=True, apply_ln=True, return_labels=True),
    "accumulated_l1": lambda c: c.accumulated_resid(layer=1, apply_ln=True, return_labels=True),
    "accumulated_raw": lambda c: c.accumulated_resid(incl_mid=True, return_labels=True),
    "decompose": lambda c: c.decompose_resid(apply_ln=True, return_labels=True),
    "decompose_raw": lambda c: c.decompose_resid(return_labels=True),
    "decompose_l1_mlp": lambda c: c.decompose_resid(
        layer=1, mlp_input=True, apply_ln=True, return_labels=True
    ),
    "heads": lambda c: c.stack_head_results(incl_remainder=True, apply_ln=True, return_labels=True),
    "heads_raw_l1": lambda c: c.stack_head_results(layer=1, return_labels=True),
}


@pytest.fixture(scope="module")
def processed():
    model = tl_model(process=True)
    return model, model.run_with_cache(TOKENS)[1]


@pytest.fixture(scope="module")
def unprocessed():
    model = tl_model(process=False)
    return model, model.run_with_cache(TOKENS)[1]


def test_logits_and_loss_unprocessed(unprocessed):
    model, _ = unprocessed
    assert_close(model(TOKENS), G["raw.logits"], **TOL)
    assert_close(model(TOKENS, return_type="loss"), G["raw.loss"], **TOL)
    assert_close(model(TOKENS, return_type="loss", loss_per_token=True), G["raw.loss_per_token"], **TOL)
    logits, loss = model(TOKENS, return_type="both")
    assert_close(loss, G["raw.loss"], **TOL)
    assert model(TOKENS, return_type=None) is None


def test_processed_logits_and_folded_weights(processed):
    model, _ = processed
    assert_close(model(TOKENS), G["proc.logits"], **TOL)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_in", "b_in", "W_out", "b_out"):
        assert_close(getattr(model, name), G[f"proc.{name}"], **TOL, msg=name)
    for name in ("W_E", "W_pos", "W_U", "b_U"):
        assert_close(getattr(model, name), G[f"proc.{name}"], **TOL, msg=name)


@pytest.mark.parametrize("key", sorted(STACKS))
def test_cache_stacks(processed, key):
    stack, labels = STACKS[key](processed[1])
    assert labels == LABELS[key]
    assert_close(stack, G[f"proc.{key}"], **TOL)


def test_logit_attributions(processed):
    _, cache = processed
    parts = cache.decompose_resid()
    assert_close(cache.logit_attrs(parts, CORRECT, INCORRECT), G["proc.logit_attrs_diff"], **TOL)
    assert_close(cache.logit_attrs(parts, CORRECT), G["proc.logit_attrs_token"], **TOL)
    heads = cache.stack_head_results()[:, :, -1]
    assert_close(
        cache.logit_attrs(heads, CORRECT, INCORRECT, pos_slice=-1), G["proc.logit_attrs_heads_diff"], **TOL
    )


def test_unfolded_model_is_exact_without_folding(unprocessed):
    """apply_ln multiplies by the norm's gain, so the unfolded model's logit-difference attribution per sublayer
    is TransformerLens's on the folded model (folding would give a different answer only by moving value
    biases between heads and b_O, and by centring the unembedding, which single-token logits feel)."""
    _, cache = unprocessed
    parts = cache.decompose_resid()
    assert_close(cache.logit_attrs(parts, CORRECT, INCORRECT), G["proc.logit_attrs_diff"], **TOL)


def test_logit_attrs_add_up_to_the_logit_difference(unprocessed):
    model, cache = unprocessed
    parts, labels = cache.decompose_resid(return_labels=True)
    attrs = cache.logit_attrs(parts, CORRECT, INCORRECT)  # [component, batch, pos]
    logits = model(TOKENS)
    diff = logits[..., CORRECT] - logits[..., INCORRECT]
    w_u, b_u, ln = model.W_U, model.b_U, model.ln_final
    biases = ln.b @ (w_u[:, CORRECT] - w_u[:, INCORRECT]) + b_u[CORRECT] - b_u[INCORRECT]
    assert_close(attrs.sum(0) + biases, diff, **TOL)


def test_factored_matrix():
    factored = transformer_lens.FactoredMatrix(G["fm.A"], G["fm.B"])
    assert_close(factored.AB, G["fm.AB"])
    assert_close(factored.norm(), G["fm.norm"], **TOL)
    assert_close(factored.S, G["fm.S"], **TOL)
    assert_close(factored.eigenvalues.real, G["fm.eigenvalues.real"], **TOL)
    assert_close(factored.eigenvalues.imag, G["fm.eigenvalues.imag"], **TOL)
    signs = (factored.U * G["fm.U"]).sum(0).sign()  # singular vectors are defined up to sign
    assert_close(factored.U * signs, G["fm.U"], **TOL)
    assert_close(factored.V * signs, G["fm.Vh"], **TOL)
    product = factored @ G["fm.C"]
    assert_close(product.AB, G["fm.ABC"], **TOL)
    assert_close(product.S, G["fm.ABC.S"], **TOL)
    assert_close(factored.get_corner(3), G["fm.corner"])
    assert_close(factored.U @ torch.diag_embed(factored.S) @ factored.V.T, factored.AB, **TOL)


def test_model_ov_qk(processed):
    model, _ = processed
    assert_close(model.OV.AB, G["proc.OV.AB"], **TOL)
    assert_close(model.QK.AB, G["proc.QK.AB"], **TOL)
    assert_close(model.OV.S, G["proc.OV.S"], **TOL)
    assert_close(model.QK.norm(), G["proc.QK.norm"], **TOL)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("prepend_bos", "key"), [(None, "default"), (True, "bos"), (False, "no_bos")])
def test_induction_loss(seed, prepend_bos, key):
    """The same ids from the same global seed, BOS written over the first id, the mean from subseq_len + 1 on:
    TransformerLens's value on a checkpoint whose vocabulary holds the ids it draws."""
    model = transformer_lens.HookedTransformer.from_pretrained_no_processing(str(GOLDEN / "tiny_gpt2_20k"))
    torch.manual_seed(seed)
    loss = transformer_lens.evals.induction_loss(model, batch_size=3, subseq_len=8, prepend_bos=prepend_bos)
    assert_close(loss, G[f"induction.{key}.{seed}"], **TOL)
