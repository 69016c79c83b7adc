"""Transcoder evaluation against the same quantities computed by hand here."""

from __future__ import annotations

import pytest
import torch

from interp.sae import evaluate, evaluate_transcoders
from tests.sae.models import tiny_model, tokens
from tests.sae.transcoder.factories import random_clt, random_set


def _nll(logits, ids):
    logp = logits[:, :-1].log_softmax(-1)
    return -logp.gather(-1, ids[:, 1:, None]).squeeze(-1), logp


@pytest.mark.parametrize("kind", ["set", "clt"])
def test_per_layer_and_replacement_metrics_are_the_hand_computed_ones(kind):
    model, ids = tiny_model(), tokens(4, 9)
    tc = random_set(activation="topk", k=4) if kind == "set" else random_clt(activation="relu")
    frame = evaluate_transcoders(model, tc, ids, batch_size=3)
    assert list(frame["layer"]) == [0, 1] and list(frame["hook"]) == [
        "blocks.0.hook_mlp_out",
        "blocks.1.hook_mlp_out",
    ]
    names = [tc.input_hook(i) for i in range(2)] + [tc.output_hook(i) for i in range(2)]
    with torch.no_grad():
        logits, cache = model.run_with_cache(ids, names_filter=names)
        inputs = {i: cache[tc.input_hook(i)].reshape(-1, 16) for i in range(2)}
        outs = tc.reconstruct(inputs)
        for i, row in frame.iterrows():
            y = cache[tc.output_hook(i)].reshape(-1, 16).double()
            sse = (outs[i].double() - y).pow(2).sum()
            sst = (y - y.mean(0)).pow(2).sum()
            assert row["fvu"] == pytest.approx(float(sse / sst), rel=1e-6)
            acts = tc.encode(inputs[i], i)[1]
            assert row["l0"] == pytest.approx(float((acts != 0).sum(-1).float().mean()))
            assert row["dead_fraction"] == pytest.approx(float(((acts != 0).sum(0) == 0).float().mean()))
        with model.transcoders(tc):
            replaced = model(ids)
        zero = [(tc.output_hook(i), lambda a, h: torch.zeros_like(a)) for i in range(2)]
        zeroed = model.run_with_hooks(ids, fwd_hooks=zero)
        clean_nll, clean_logp = _nll(logits, ids)
        rep_nll, rep_logp = _nll(replaced, ids)
        ce_zero = _nll(zeroed, ids)[0].mean()
        kl = (clean_logp.exp() * (clean_logp - rep_logp)).sum(-1).mean()
    row = frame.iloc[0]
    assert row["ce_clean"] == pytest.approx(float(clean_nll.mean()), rel=1e-5)
    assert row["ce_replacement"] == pytest.approx(float(rep_nll.mean()), rel=1e-5)
    assert row["ce_recovered"] == pytest.approx(
        float((ce_zero - rep_nll.mean()) / (ce_zero - clean_nll.mean())), rel=1e-4
    )
    assert row["kl"] == pytest.approx(float(kl), rel=1e-4) and row["kl"] > 0
    assert (frame["ce_replacement"] == row["ce_replacement"]).all()


def test_evaluate_takes_transcoders_too():
    model, ids, tc = tiny_model(), tokens(2, 6), random_set(activation="relu")
    assert evaluate(model, tc, ids).equals(evaluate_transcoders(model, tc, ids))
