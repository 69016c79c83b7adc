"""``transformer_lens.patching`` on the face gives TransformerLens 3.9's numbers on the same weights.

Golden values come from ``golden/make_patching_golden.py``: every patching function of TransformerLens run on
an IOI-style batch of the random GPT-2-shaped checkpoint, processed as ``from_pretrained`` processes it. A
grouped-query model (which TransformerLens's goldens do not cover) is checked against patches written here one
at a time with ``run_with_hooks``.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from torch.testing import assert_close

import interp.compat.transformer_lens as transformer_lens
from interp.compat.transformer_lens import patching
from tests.compat.models import GOLDEN, gqa_model, tl_model

G = load_file(GOLDEN / "patching.safetensors")
SWEEPS = [
    name
    for name in G
    if name.startswith(
        "get_act_patch_"
    )  # every function TransformerLens's module has, as the script ran them
]
TOL = dict(atol=2e-4, rtol=1e-4)


def _metric(model, clean, corrupted, answers):
    def logit_diff(logits):
        last = logits[:, -1]
        return (last.gather(1, answers[:, :1]) - last.gather(1, answers[:, 1:])).mean()

    clean_logits, cache = model.run_with_cache(clean)
    clean_diff, corrupted_diff = logit_diff(clean_logits), logit_diff(model(corrupted))
    return cache, lambda logits: (logit_diff(logits) - corrupted_diff) / (clean_diff - corrupted_diff)


@pytest.fixture(scope="module")
def setup():
    model = tl_model(process=True)
    cache, metric = _metric(model, G["clean_tokens"], G["corrupted_tokens"], G["answers"])
    return model, cache, metric


def test_every_function_of_the_module_is_covered_by_the_goldens():
    assert len(SWEEPS) == 18
    assert {name for name in dir(patching) if name.startswith("get_act_patch_")} == set(SWEEPS)


@pytest.mark.parametrize("name", SWEEPS)
def test_patching_function_equals_transformer_lens(setup, name):
    model, cache, metric = setup
    result = getattr(patching, name)(model, G["corrupted_tokens"], cache, metric)
    assert result.shape == G[name].shape and result.dtype == torch.float32
    assert_close(result, G[name], **TOL)


def test_generic_patch_with_an_index_df_and_a_setter_of_ones_own(setup):
    model, cache, metric = setup
    rows = [[0, 3], [1, 5], [1, 0], [0, 16]]

    def half_stream_setter(corrupted, index, clean):
        _, pos = index
        corrupted[:, pos, : corrupted.shape[-1] // 2] = clean[:, pos, : corrupted.shape[-1] // 2]
        return corrupted

    index_df = pd.DataFrame(rows, columns=["layer", "pos"])
    values, returned = patching.generic_activation_patch(
        model,
        G["corrupted_tokens"],
        cache,
        metric,
        half_stream_setter,
        "resid_mid",
        index_df=index_df,
        return_index_df=True,
    )
    assert returned is index_df and values.shape == (4,)
    assert_close(values, G["generic_index_df"], **TOL)
    values, frame = patching.generic_activation_patch(
        model,
        G["corrupted_tokens"],
        cache,
        metric,
        patching.layer_pos_patch_setter,
        "resid_post",
        index_axis_names=("layer", "pos"),
        return_index_df=True,
        batch_size=3,  # several forward passes, one copy per row, must give the same numbers
    )
    assert torch.equal(torch.tensor(frame.values), G["generic_resid_post_index"])
    assert_close(values, G["generic_resid_post"], **TOL)


def test_a_setter_that_returns_a_new_tensor_works_as_one_that_edits_in_place(setup):
    model, cache, metric = setup

    def copying_setter(corrupted, index, clean):
        out = corrupted.clone()
        out[:, index[1]] = clean[:, index[1]]
        return out

    args = (model, G["corrupted_tokens"], cache, metric)
    by_copy = patching.generic_activation_patch(*args, copying_setter, "resid_pre", ("layer", "pos"))
    assert_close(by_copy, G["get_act_patch_resid_pre"], **TOL)


def test_install_exposes_the_module_as_transformer_lens_patching(monkeypatch):
    import importlib
    import sys

    for name in [n for n in sys.modules if n == "transformer_lens" or n.startswith("transformer_lens.")]:
        monkeypatch.delitem(sys.modules, name)
    transformer_lens.install()
    assert importlib.import_module("transformer_lens.patching") is patching
    assert importlib.import_module("transformer_lens").patching is patching


def _naive_head_patch(model, clean_cache, corrupted, metric, hook, head, pos=None):
    """One run with one head (at one position, or all) of ``hook`` taken from the clean cache."""

    def patch(act, hook_point):
        act = act.clone()
        where = slice(None) if pos is None else pos
        act[:, where, head] = clean_cache[hook_point.name][:, where, head]
        return act

    with torch.no_grad():
        return float(metric(model.run_with_hooks(corrupted, fwd_hooks=[(hook, patch)])))


def test_grouped_query_heads_are_key_value_heads_for_k_and_v_and_padded_in_the_stacks():
    model = transformer_lens.HookedTransformer.from_interp(gqa_model())
    generator = torch.Generator().manual_seed(0)
    clean = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=generator)
    corrupted = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=generator)
    cache, metric = _metric(model, clean, corrupted, torch.tensor([[3, 5], [7, 1]]))
    n_layers, n_heads, n_kv = model.cfg.n_layers, model.cfg.n_heads, model.cfg.n_kv_heads
    assert n_kv < n_heads
    k = patching.get_act_patch_attn_head_k_all_pos(model, corrupted, cache, metric)
    v_by_pos = patching.get_act_patch_attn_head_v_by_pos(model, corrupted, cache, metric)
    assert k.shape == (n_layers, n_kv) and v_by_pos.shape == (n_layers, 6, n_kv)
    for layer in range(n_layers):
        for head in range(n_kv):
            expected = _naive_head_patch(model, cache, corrupted, metric, f"blocks.{layer}.attn.hook_k", head)
            assert k[layer, head].item() == pytest.approx(expected, abs=1e-4)
            expected = _naive_head_patch(
                model, cache, corrupted, metric, f"blocks.{layer}.attn.hook_v", head, pos=2
            )
            assert v_by_pos[layer, 2, head].item() == pytest.approx(expected, abs=1e-4)
    every = patching.get_act_patch_attn_head_all_pos_every(model, corrupted, cache, metric)
    assert every.shape == (5, n_layers, n_heads)
    assert_close(every[2, :, :n_kv], k)
    assert torch.equal(every[2:4, :, n_kv:], torch.zeros(2, n_layers, n_heads - n_kv))
    q_head = _naive_head_patch(model, cache, corrupted, metric, "blocks.1.attn.hook_q", n_heads - 1)
    assert every[1, 1, n_heads - 1].item() == pytest.approx(q_head, abs=1e-4)


def test_patching_on_a_plain_interp_model_needs_no_face():
    plain = gqa_model()
    tokens = torch.tensor([[1, 2, 3, 4]])
    _, cache = plain.run_with_cache(tokens)
    out = patching.get_act_patch_resid_pre(plain, tokens, cache, lambda logits: logits[0, -1, 0])
    with torch.no_grad():
        clean = float(plain(tokens)[0, -1, 0])
    assert_close(out, torch.full((plain.cfg.n_layers, 4), clean), atol=1e-5, rtol=0)


def test_bad_arguments_are_refused_before_any_run(setup):
    model, cache, metric = setup
    tokens = G["corrupted_tokens"]
    setter = patching.layer_pos_patch_setter
    with pytest.raises(ValueError, match="exactly one of them; got neither"):
        patching.generic_activation_patch(model, tokens, cache, metric, setter, "resid_pre")
    both = dict(index_axis_names=("layer", "pos"), index_df=pd.DataFrame([[0, 1]], columns=["layer", "pos"]))
    with pytest.raises(ValueError, match="got both"):
        patching.generic_activation_patch(model, tokens, cache, metric, setter, "resid_pre", **both)
    with pytest.raises(ValueError, match=r"\['position'\] are not"):
        patching.generic_activation_patch(
            model, tokens, cache, metric, setter, "resid_pre", ("layer", "position")
        )
    _, small_cache = model.run_with_cache(G["clean_tokens"], names_filter="blocks.0.hook_resid_pre")
    with pytest.raises(ValueError, match="the clean cache has no 'blocks.1.hook_resid_pre'"):
        patching.get_act_patch_resid_pre(model, tokens, small_cache, metric)
    with pytest.raises(ValueError, match=r"returned a tensor of shape \[3\]; it must return one number"):
        patching.get_act_patch_resid_pre(model, tokens, cache, lambda logits: logits[:, -1, 0])
    with pytest.raises(ValueError, match="clean and corrupted inputs must have the same"):
        patching.get_act_patch_resid_pre(model, tokens[:, :-1], cache, metric)


def test_interp_analysis_takes_the_face_model():
    """interp's own patching passes the attention mask as the second positional argument, None included; on
    the face it gives TransformerLens's numbers (its normalised recovery is the goldens' metric)."""
    from interp.analysis import logit_difference, patch

    face = tl_model(process=True)
    clean, corrupted = G["clean_tokens"], G["corrupted_tokens"]
    assert face(clean, None).shape == (*clean.shape, face.cfg.d_vocab)  # a mask of None, not return_type=None
    assert face(clean, "loss").ndim == 0  # a string there is TransformerLens's return_type
    labels = {"answer": G["answers"][:, 0], "foil": G["answers"][:, 1]}
    frame = patch(face, clean, corrupted, "blocks.{layer}.hook_resid_pre", logit_difference, labels=labels)
    values = torch.tensor(frame["value"].to_numpy(), dtype=torch.float32).reshape(2, -1)  # [layer, pos]
    assert_close(values, G["get_act_patch_resid_pre"], **TOL)
