import math

import pytest
import torch

from hooks import ActivationCache
from interp import HookedTransformer
from interp.analysis import (
    MissingHooksError,
    duplicate_token_scores,
    first_token_scores,
    head_table,
    induction_scores,
    previous_token_scores,
    repeated_tokens,
    span_attention,
)
from tests.analysis.models import CONFIGS, build, tokens


@pytest.fixture(autouse=True)
def _no_grad():
    """These tests run without autograd, as analysis code usually does; the mode ends with each test."""
    with torch.no_grad():
        yield


def planted_previous_token_model() -> HookedTransformer:
    """Layer 0 head 2 attends from position p to p - 1.

    W_pos writes (cos, sin, -cos, -sin)(theta p) into dims 0-3 (mean zero, so the LayerNorm keeps it, scaled
    to about 4); the head's query rotates that by -theta and its key reads it as is, so the score
    16 c^2 cos(theta (p - 1 - k)) / sqrt(d_head) peaks at k = p - 1.
    """
    model = HookedTransformer(CONFIGS["gpt2"])
    theta, c = math.pi / 8, 6.0
    angles = theta * torch.arange(16.0)
    with torch.no_grad():
        model.pos_embed.W_pos.zero_()
        model.pos_embed.W_pos[:, :4] = torch.stack(
            [angles.cos(), angles.sin(), -angles.cos(), -angles.sin()], -1
        )
        attn = model.blocks[0].attn
        attn.W_Q[2].zero_()
        attn.W_K[2].zero_()
        attn.W_Q[2][:2, :2] = c * torch.tensor(
            [[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]]
        )
        attn.W_K[2][:2, :2] = c * torch.eye(2)
    return model


def test_planted_previous_token_head_ranks_first():
    model = planted_previous_token_model()
    toks = tokens(batch=4, n=16)
    scores = previous_token_scores(model, toks)
    assert scores.shape == (2, 4)
    table = head_table(scores)
    assert (table.loc[0, "layer"], table.loc[0, "head"]) == (0, 2)
    assert table.loc[0, "score"] > 0.9 > table.loc[1, "score"]
    # left padding: positions count real tokens, so the padded batch scores the same
    padded = torch.cat([torch.zeros(4, 3, dtype=torch.long), toks[:, :13]], dim=1)
    mask = torch.cat([torch.zeros(4, 3), torch.ones(4, 13)], dim=1).long()
    torch.testing.assert_close(
        previous_token_scores(model, padded, attention_mask=mask),
        previous_token_scores(model, toks[:, :13]),
        atol=1e-5,
        rtol=0,
    )


def fake_patterns(toks: torch.Tensor) -> ActivationCache:
    """Layer 0 heads: 0 induction, 1 duplicate, 2 previous-token, 3 first-token; layer 1 uniform-causal."""
    batch, n = toks.shape
    same = toks[:, :, None] == toks[:, None, :]  # [batch, query, key]
    earlier = torch.ones(n, n, dtype=torch.bool).tril(-1)
    previous = torch.eye(n, dtype=torch.bool).roll(-1, dims=1) & earlier
    duplicate = same & earlier
    induction = torch.zeros(batch, n, n, dtype=torch.bool)
    induction[:, :, 1:] = same[:, :, :-1] & torch.ones(n, n - 1, dtype=torch.bool).tril(-1)
    first = torch.zeros(batch, n, n, dtype=torch.bool)
    first[:, :, 0] = True

    def rows(target: torch.Tensor) -> torch.Tensor:
        target = target.float() + (~target.any(-1, keepdim=True)) * torch.eye(
            n
        )  # queries without a target: self
        return target / target.sum(-1, keepdim=True)

    layer0 = torch.stack(
        [rows(induction), rows(duplicate), rows(previous.expand(batch, n, n)), rows(first)], 1
    )
    uniform = torch.ones(n, n).tril()
    layer1 = (uniform / uniform.sum(-1, keepdim=True)).expand(batch, 4, n, n)
    return ActivationCache(
        {"blocks.0.attn.hook_pattern": layer0, "blocks.1.attn.hook_pattern": layer1}, n_layers=2
    )


def test_each_score_finds_its_head():
    model = build("gpt2")
    toks = repeated_tokens(50, 6, batch=3, seed=1)
    assert toks.shape == (3, 12) and torch.equal(toks[:, :6], toks[:, 6:])
    cache = fake_patterns(toks)
    for fn, head in (
        (induction_scores, 0),
        (duplicate_token_scores, 1),
        (previous_token_scores, 2),
        (first_token_scores, 3),
    ):
        scores = fn(model, toks, cache=cache)
        assert scores[0, head] == pytest.approx(1.0), fn.__name__
        assert int(scores.flatten().argmax()) == head, fn.__name__


def test_span_attention():
    model = build("gpt2")
    toks = tokens(n=8)
    _, cache = model.run_with_cache(toks, names_filter=["blocks.*.attn.hook_pattern", "blocks.*.attn.hook_v"])
    for by in ("weight", "norm"):
        everything = span_attention(model, cache, slice(None), slice(None), by=by)
        torch.testing.assert_close(everything, torch.ones(2, 4), atol=1e-5, rtol=0)
    weight = span_attention(model, cache, [5, 6], [0, 1, 2], reduce="none")
    pattern = cache["blocks.1.attn.hook_pattern"]  # [batch, head, query, key]
    expected = pattern[:, :, 5:7, 0:3].sum(-1).mean(-1)  # [batch, head]
    torch.testing.assert_close(weight[:, 1], expected, atol=1e-6, rtol=0)
    masks = torch.zeros(2, 8, dtype=torch.bool)
    masks[0, 5], masks[1, 6] = True, True
    per_row = span_attention(model, cache, masks, 0, reduce="none")
    torch.testing.assert_close(per_row[:, 1], pattern[[0, 1], :, [5, 6], 0], atol=1e-6, rtol=0)
    with pytest.raises(IndexError, match="key_positions 8 is out of range"):
        span_attention(model, cache, 0, 8)
    with pytest.raises(ValueError, match=r"selects no position in batch rows \[1\]"):
        span_attention(model, cache, masks & torch.tensor([[True], [False]]), 0)
    _, patterns_only = model.run_with_cache(toks, names_filter="blocks.*.attn.hook_pattern")
    with pytest.raises(MissingHooksError, match="hook_v"):
        span_attention(model, patterns_only, 0, 0, by="norm")


def test_span_stacks_agree_with_single_spans_and_give_nan_for_empty_rows():
    model = build("gpt2")
    toks = tokens(n=8)
    _, cache = model.run_with_cache(toks, names_filter=["blocks.*.attn.hook_pattern", "blocks.*.attn.hook_v"])
    query_spans = [[5, 6], [7], [2, 3, 4]]
    key_spans = [[0], [1, 2], [0, 3, 5]]

    def stack(spans):
        masks = torch.zeros(len(spans), 2, 8, dtype=torch.bool)  # [n_span, batch, pos]
        for i, span in enumerate(spans):
            masks[i, :, span] = True
        return masks

    for by in ("weight", "norm"):
        stacked = span_attention(model, cache, stack(query_spans), stack(key_spans), by=by, reduce="none")
        assert stacked.shape == (2, 3, 3, 2, 4)
        for qi, q in enumerate(query_spans):
            for ki, k in enumerate(key_spans):
                single = span_attention(model, cache, q, k, by=by, reduce="none")  # [batch, layer, head]
                torch.testing.assert_close(stacked[:, qi, ki], single, atol=1e-6, rtol=0)
    queries = stack(query_spans)
    queries[1, 0] = False  # the second query span selects nothing in the first row
    stacked = span_attention(model, cache, queries, stack(key_spans), reduce="none")
    assert bool(stacked[0, 1].isnan().all()) and not bool(stacked[1, 1].isnan().any())
    mean = span_attention(model, cache, queries, stack(key_spans))
    torch.testing.assert_close(mean[1], stacked[1, 1], atol=1e-6, rtol=0)  # the empty row is skipped
