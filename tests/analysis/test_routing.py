"""Routing statistics against counts made here, token by token, from ``transformers``' own router logits."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from interp.analysis import Batch
from interp.analysis.routing import routing_statistics
from tests.analysis.moe_models import padded, pair, tokens


def _naive(name: str, batches: list[tuple[torch.Tensor, torch.Tensor]]):
    """Counts, weight sums and per-token counts from the reference's router logits, by plain loops."""
    reference, model = pair(name)
    k, renormalise = model.cfg.experts_per_token, model.cfg.expert_weights == "softmax_topk"
    moe = [l for l, kind in enumerate(model.cfg.mlp_types) if kind == "moe"]
    counts, weights, by_token, totals = Counter(), Counter(), Counter(), Counter()
    for ids, mask in batches:
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            out = reference(
                input_ids=ids, attention_mask=mask, position_ids=positions, output_router_logits=True
            )
        for layer, logits in zip(moe, out.router_logits, strict=True):
            probs = logits.view(*ids.shape, -1).double().softmax(-1)
            for b in range(ids.shape[0]):
                for p in range(ids.shape[1]):
                    if not mask[b, p]:
                        continue
                    ranked = probs[b, p].sort(descending=True)
                    assert ranked.values[k - 1] - ranked.values[k] > 1e-4  # the choice is not a near-tie
                    chosen, w = ranked.indices[:k].tolist(), ranked.values[:k]
                    w = w / w.sum() if renormalise else w
                    for e, we in zip(chosen, w.tolist(), strict=True):
                        counts[layer, e] += 1
                        weights[layer, e] += we
                        by_token[layer, int(ids[b, p]), e] += 1
        for b in range(ids.shape[0]):
            for p in range(ids.shape[1]):
                if mask[b, p]:
                    totals[int(ids[b, p])] += 1
    return moe, counts, weights, by_token, totals


@pytest.mark.parametrize("name", ["mixtral", "qwen2-moe", "gpt-oss"])
def test_counts_match_the_reference_routers(name):
    """Counts, shares, mean weights and per-token counts over two padded batches streamed one at a time; the
    dense layer of Qwen2-MoE is not among the layers."""
    batches = [padded(3, 7, seed=0), padded(2, 9, seed=1)]
    _, model = pair(name)
    stats = routing_statistics(model, [Batch(ids, mask) for ids, mask in batches])
    moe, counts, weights, by_token, totals = _naive(name, batches)
    n_real = sum(int(mask.sum()) for _, mask in batches)
    assert stats.layers == tuple(moe) and stats.n_tokens == n_real
    frame = stats.frame()
    for row in frame.itertuples():
        assert row.count == counts[row.layer, row.expert]
        assert row.share == pytest.approx(counts[row.layer, row.expert] / (n_real * stats.k), abs=1e-12)
        if row.count:
            assert row.mean_weight == pytest.approx(weights[row.layer, row.expert] / row.count, abs=1e-5)
        else:
            assert math.isnan(row.mean_weight)
    tokens_frame = stats.by_token()
    assert dict(
        zip(
            zip(tokens_frame.layer, tokens_frame.token, tokens_frame.expert, strict=True),
            tokens_frame["count"],
            strict=True,
        )
    ) == dict(by_token)
    for row in tokens_frame.itertuples():
        assert row.fraction == pytest.approx(by_token[row.layer, row.token, row.expert] / totals[row.token])
    entropy = stats.entropy()
    for row in entropy.itertuples():
        shares = [counts[row.layer, e] / (n_real * stats.k) for e in range(stats.n_experts)]
        expected = -sum(s * math.log(s) for s in shares if s)
        assert row.entropy == pytest.approx(expected, abs=1e-12)
        assert row.normalised == pytest.approx(expected / math.log(stats.n_experts), abs=1e-12)
        assert row.idle == sum(1 for s in shares if s == 0)


def test_one_layer_and_plain_tensors():
    """A layer chosen, unpadded batches given as tensors: the counts are those of that layer alone."""
    _, model = pair("qwen2-moe")
    stats = routing_statistics(model, [tokens(2, 5), tokens(1, 4, seed=3)], layers=[2], by_token=False)
    assert stats.layers == (2,) and stats.n_tokens == 14 and int(stats.counts.sum()) == 14 * 2
    full = routing_statistics(model, [tokens(2, 5), tokens(1, 4, seed=3)])
    torch.testing.assert_close(stats.counts[0], full.counts[1])
    with pytest.raises(ValueError, match="by_token=False"):
        stats.by_token()


def test_bad_input():
    _, model = pair("qwen2-moe")
    with pytest.raises(
        ValueError, match=r"layer 1 has a dense MLP, not experts; the mixture-of-experts layers are \[0, 2\]"
    ):
        routing_statistics(model, [tokens()], layers=[1])
    with pytest.raises(IndexError, match="layer 5 is out of range"):
        routing_statistics(model, [tokens()], layers=[5])
    with pytest.raises(ValueError, match="no tokens were counted"):
        routing_statistics(model, [])
    from tests.analysis.models import build

    with pytest.raises(ValueError, match="no mixture-of-experts layer"):
        routing_statistics(build("llama"), [tokens()])


def test_doctest():
    import doctest

    from interp.analysis import routing

    assert doctest.testmod(routing).attempted and doctest.testmod(routing).failed == 0
