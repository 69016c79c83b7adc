import pytest
import torch

from interp.analysis import (
    MissingHooksError,
    attention_norms,
    decompose_names,
    decompose_resid,
    decompose_stream,
    source_contributions,
)
from interp.analysis.feature_writes import feature_names
from tests.analysis.models import build, tokens
from tests.sae.transcoder.factories import random_clt, random_set
from tests.tolerance import EPS32, assert_within

KINDS = ["gpt2", "llama", "bert", "gemma2", "olmo2", "neox"]


@pytest.mark.parametrize("kind", KINDS)
def test_parts_sum_to_every_stream(kind):
    model = build(kind)
    _, cache = model.run_with_cache(tokens(), names_filter=lambda n: True)
    n = model.cfg.n_layers
    for layer in range(n):
        for where in ("pre", "post") if model.cfg.parallel_attn_mlp else ("pre", "mid", "post"):
            labels, parts = decompose_resid(model, cache, layer, where)
            assert len(labels) == parts.shape[0]
            torch.testing.assert_close(
                parts.sum(0), cache[f"blocks.{layer}.hook_resid_{where}"], atol=1e-4, rtol=0
            )
    labels, parts = decompose_resid(model, cache, n, "pre")
    torch.testing.assert_close(parts.sum(0), cache[f"blocks.{n - 1}.hook_resid_post"], atol=1e-4, rtol=0)


def test_labels_name_every_component():
    gpt2 = build("gpt2")
    _, cache = gpt2.run_with_cache(tokens(), names_filter=decompose_names(gpt2, 1, "mid"))
    labels, _ = decompose_resid(gpt2, cache, 1, "mid")
    heads = [f"L{l}H{h}" for l in range(2) for h in range(4)]
    assert labels == ["embed", "pos_embed", *heads[:4], "L0_attn_bias", "L0_mlp", *heads[4:], "L1_attn_bias"]
    bert = build("bert")
    _, cache = bert.run_with_cache(tokens(), names_filter=decompose_names(bert, 0, "post"))
    labels, _ = decompose_resid(bert, cache, 0, "post")
    assert labels[:3] == ["embed", "pos_embed", "embed_ln_bias"]
    assert labels[-4:] == ["L0_attn_bias", "L0_ln1_bias", "L0_mlp", "L0_ln2_bias"]


def test_parallel_blocks_have_no_mid_stream():
    model = build("neox")
    _, cache = model.run_with_cache(tokens(), names_filter=decompose_names(model, 0, "post"))
    with pytest.raises(ValueError, match="parallel blocks have no resid_mid"):
        decompose_resid(model, cache, 0, "mid")


def test_z_stands_in_for_result():
    model = build("llama")
    names = [n.replace("hook_result", "hook_z") for n in decompose_names(model, 2, "pre")]
    _, cache = model.run_with_cache(tokens(), names_filter=names + ["blocks.1.hook_resid_post"])
    _, parts = decompose_resid(model, cache, 2, "pre")
    torch.testing.assert_close(parts.sum(0), cache["blocks.1.hook_resid_post"], atol=1e-4, rtol=0)


def test_missing_hooks_are_named():
    model = build("bert")
    _, cache = model.run_with_cache(tokens(), names_filter="hook_embed")
    with pytest.raises(MissingHooksError, match=r"blocks\.0\.attn\.hook_result.*decompose_names"):
        decompose_resid(model, cache, 1, "pre")
    with pytest.raises(IndexError, match="layer 3 is out of range"):
        decompose_resid(model, cache, 3, "pre")
    with pytest.raises(IndexError, match="layer 2 is out of range"):
        decompose_resid(model, cache, 2, "mid")
    with pytest.raises(ValueError, match="where='middle'"):
        decompose_resid(model, cache, 0, "middle")


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_source_contributions_sum_to_result(kind):
    model = build(kind)
    _, cache = model.run_with_cache(tokens(), names_filter="blocks.1.attn.*")
    for head in range(model.cfg.n_heads):
        for q in (0, 5, -1):
            parts = source_contributions(model, cache, 1, head, q)  # [batch, key, d_model]
            assert parts.shape == (2, 8, 32)
            torch.testing.assert_close(
                parts.sum(1), cache["blocks.1.attn.hook_result"][:, q, head], atol=1e-5, rtol=0
            )


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_attention_norms_match_naive(kind):
    model = build(kind)
    _, cache = model.run_with_cache(tokens(), names_filter="blocks.0.attn.*")
    norms = attention_norms(model, cache, 0)
    naive = torch.stack(
        [
            torch.stack([source_contributions(model, cache, 0, h, q).norm(dim=-1) for q in range(8)], dim=1)
            for h in range(model.cfg.n_heads)
        ],
        dim=1,
    )  # [batch, head, query, key]
    torch.testing.assert_close(norms, naive, atol=1e-5, rtol=1e-5)


def test_source_errors():
    model = build("gpt2")
    _, cache = model.run_with_cache(tokens(), names_filter="blocks.0.attn.hook_pattern")
    with pytest.raises(MissingHooksError, match="hook_v"):
        source_contributions(model, cache, 0, 0, 0)
    _, cache = model.run_with_cache(tokens(), names_filter="blocks.0.attn.*")
    with pytest.raises(IndexError, match="head 4 is out of range"):
        source_contributions(model, cache, 0, 4, 0)
    with pytest.raises(IndexError, match="query_pos 8 is out of range for a sequence of 8 tokens"):
        source_contributions(model, cache, 0, 0, 8)


def test_decompose_stream_names_its_parts_and_refuses_bad_input():
    model = build("gemma2")  # sandwich norms: every head's part goes through ln1_post
    ids = tokens()
    names = [*decompose_names(model, 1, heads="source"), "blocks.1.hook_resid_pre"]
    _, cache = model.run_with_cache(ids, names_filter=names)
    nodes, parts = decompose_stream(model, cache, 1, position=-1, heads="source")
    last = ids.shape[1] - 1
    torch.testing.assert_close(parts.sum(0), cache["blocks.1.hook_resid_pre"][0, last], atol=1e-4, rtol=0)
    heads = [n for n in nodes if n.kind == "head"]
    assert heads and all(n.position == last and n.source is not None and n.source <= last for n in heads)
    assert nodes[0] == f"token@{last}" and len(set(nodes)) == len(nodes)
    with pytest.raises(ValueError, match="needs one position"):
        decompose_stream(model, cache, 1, heads="source")
    with pytest.raises(IndexError, match="position 99 is out of range"):
        decompose_stream(model, cache, 1, position=99, heads="source")
    with pytest.raises(MissingHooksError, match=r"hook_z.*heads='z'"):
        decompose_stream(model, cache, 1, position=0, heads="z")
    with pytest.raises(ValueError, match="heads='qk'"):
        decompose_names(model, 1, heads="qk")


def test_decompose_stream_splits_mlps_into_transcoder_features():
    model = build("gpt2")
    d_model = model.cfg.d_model
    tc = random_clt(n_layers=2, d_model=d_model, skip=True)
    ids = tokens()
    names = [*decompose_names(model, 2, heads="z"), *feature_names(tc, 2), "blocks.1.hook_resid_post"]
    _, cache = model.run_with_cache(ids, names_filter=names)
    pos = ids.shape[1] - 1
    nodes, parts = decompose_stream(model, cache, 2, position=pos, heads="z", transcoders=tc)
    assert not [n for n in nodes if n.kind == "mlp"]
    assert {"feature", "tc_bias", "skip", "error"} <= {n.kind for n in nodes}
    # a cross-layer feature of layer 0 writes layers 0 and 1: one part, the sum of both writes
    features = [n for n in nodes if n.kind == "feature"]
    assert len(set(features)) == len(features) and all(n.position == pos for n in features)
    stream = cache["blocks.1.hook_resid_post"][0, pos]
    # Two float32 sums of the same terms: the parts added up here, and the model's stream, whose attention
    # output sums every head's z @ W_O in one product where the parts hold one product per head. Each differs
    # from the exact sum by at most (additions) * eps * (the terms' sizes).
    cfg = model.cfg
    head_terms = sum(
        torch.einsum(
            "he,hed->d", cache[f"blocks.{l}.attn.hook_z"][0, pos].abs(), model.blocks[l].attn.W_O.abs()
        )
        for l in range(2)
    )
    additions = parts.shape[0] + cfg.n_heads * cfg.d_head
    bound = additions * EPS32 * (parts.abs().sum(0) + head_terms.detach())
    assert_within(parts.sum(0), stream, bound, "parts against the stream")
    _, without = model.run_with_cache(
        ids, names_filter=[n for n in names if n != "blocks.0.ln2.hook_normalized"]
    )
    with pytest.raises(MissingHooksError, match=r"blocks\.0\.ln2\.hook_normalized"):
        decompose_stream(model, without, 2, position=pos, heads="z", transcoders=tc)
    with pytest.raises(ValueError, match="needs one position"):
        decompose_stream(model, cache, 2, heads="z", transcoders=tc)
    attn_writer = random_set(
        n_layers=2, d_model=d_model, input_site="ln1.hook_normalized", output_site="hook_attn_out"
    )
    with pytest.raises(ValueError, match="write 'blocks.0.hook_attn_out', not 'blocks.0.hook_mlp_out'"):
        decompose_stream(model, cache, 2, position=pos, heads="z", transcoders=attn_writer)
