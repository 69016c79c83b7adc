"""One evaluate for every dictionary: the values the per-kind evaluations gave, L0 of negative activations, the
mean ablation of a transcoder set, and lists of mixed kinds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from interp.sae import SAESet, evaluate, evaluate_transcoders
from tests.sae.models import random_sae, tiny_model, tokens
from tests.sae.transcoder.factories import random_clt, random_set

GOLDEN = Path(__file__).parent / "golden" / "evaluate_per_kind.json"
"""What ``interp.sae.evaluate`` (SAEs) and ``interp.sae.evaluate_transcoders`` (transcoder sets and CLTs) gave
as two functions with two tallies (commit 2b27093), on the inputs :func:`_inputs` builds, with one thread as the
tests run."""


def _inputs():
    ids = tokens(4, 9, seed=5)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # right padding
    mask[2, :2] = 0  # left padding
    return tiny_model(), ids, mask


def _frames(model, ids, mask):
    sae = random_sae("blocks.1.hook_resid_pre", d_sae=40, k=5)
    return {
        "sae": evaluate(model, [sae], ids, mask, batch_size=3, dense_threshold=0.2),
        "sae_skip": evaluate(model, sae, ids, mask, batch_size=3, skip_first=1),
        "set": evaluate(model, random_set(activation="topk", k=4), ids, mask, batch_size=3),
        "clt": evaluate(model, random_clt(activation="jumprelu"), ids, mask, batch_size=3),
    }


def test_one_evaluate_gives_every_value_the_per_kind_evaluations_gave():
    golden = json.loads(GOLDEN.read_text())
    frames = _frames(*_inputs())
    for kind, rows in golden.items():
        frame = frames[kind]
        assert len(frame) == len(rows), kind
        for got, want in zip(frame.to_dict("records"), rows, strict=True):
            for column, value in want.items():
                if isinstance(value, float) and math.isnan(value):
                    assert math.isnan(got[column]), (kind, column)
                else:
                    assert got[column] == value, (kind, column, got[column], value)
    # The same columns for every kind: the per-kind names are the one set's aliases.
    assert list(frames["sae"].columns[:19]) == list(frames["set"].columns[:19])
    for frame in frames.values():
        assert (frame["ce_spliced"] == frame["ce_sae"]).all() and (
            frame["ce_spliced"] == frame["ce_replacement"]
        ).all()
        assert (frame["ce_recovered"] == frame["ce_recovered_zero"]).all()


def _negative_topk_set(k: int = 3):
    """A TopK transcoder set whose pre-activations are all negative: circuit-tracer's TopK keeps the k largest."""
    tc = random_set(activation="topk", k=k)
    with torch.no_grad():
        tc.b_enc.fill_(-100.0)
    return tc


def test_l0_counts_negative_activations_that_write():
    model, ids, mask = _inputs()
    tc = _negative_topk_set(k=3)
    x = model.run_with_cache(ids, mask, names_filter=tc.input_hook(0))[1][tc.input_hook(0)][mask.bool()]
    acts = tc.encode(x, 0)[1]
    assert (
        bool((acts <= 0).all()) and int((acts < 0).sum(-1).min()) == 3
    )  # every token: three negative writes
    row = evaluate(model, tc, ids, mask).iloc[0]
    assert row["l0"] == 3.0  # counting acts > 0 gave 0: a dictionary that writes called silent
    assert row["dead_fraction"] == pytest.approx(float(((acts != 0).sum(0) == 0).double().mean()))

    # circuit-tracer's JumpReLU with a negative threshold: a pre-activation between it and 0 is kept
    jump = random_set(activation="jumprelu")
    with torch.no_grad():
        jump.thresholds.fill_(-1e9)
    pre = jump.pre_acts(x, 0)
    assert bool((pre < 0).any())
    row = evaluate(model, jump, ids, mask).iloc[0]
    assert row["l0"] == jump.d_transcoder  # every feature passes the threshold and writes, negative or not

    # an SAE rectifies what it keeps: its negative pre-activations write nothing, and count nothing
    sae = random_sae("blocks.0.hook_resid_post", architecture="topk", k=4)
    with torch.no_grad():
        sae.b_enc.fill_(-100.0)
    assert evaluate(model, sae, ids, mask).iloc[0]["l0"] == 0.0


def test_the_mean_ablation_of_a_transcoder_set_is_the_hand_computed_one():
    model, ids, mask = _inputs()
    tc = random_set(activation="relu")
    row = evaluate(model, tc, ids, mask).iloc[0]
    real = mask.bool()
    hooks = [tc.output_hook(layer) for layer in tc.layers]
    cache = model.run_with_cache(ids, mask, names_filter=hooks)[1]
    means = {h: cache[h][real].double().mean(0).float() for h in hooks}
    fwd = [(h, lambda a, hook: means[hook.name].expand_as(a).clone()) for h in hooks]
    with torch.no_grad():
        logits, clean = model.run_with_hooks(ids, mask, fwd_hooks=fwd), model(ids, mask)
    pairs = real[:, :-1] & real[:, 1:]

    def ce(out):
        logp = out[:, :-1].double().log_softmax(-1)
        return float(-logp.gather(-1, ids[:, 1:, None]).squeeze(-1)[pairs].mean())

    assert row["ce_mean"] == pytest.approx(ce(logits), rel=1e-5)
    assert row["ce_clean"] == pytest.approx(ce(clean), rel=1e-5)
    want = (ce(logits) - row["ce_spliced"]) / (ce(logits) - ce(clean))
    assert row["ce_recovered_mean"] == pytest.approx(want, rel=1e-4)


def test_a_list_of_kinds_gives_each_dictionary_s_own_rows():
    model, ids, mask = _inputs()
    sae, tc = random_sae("blocks.0.hook_resid_post"), random_set(activation="topk", k=4)
    frame = evaluate(model, [sae, tc], ids, mask)
    assert list(frame["hook"]) == [
        "blocks.0.hook_resid_post",
        "blocks.0.hook_mlp_out",
        "blocks.1.hook_mlp_out",
    ]
    alone = [evaluate(model, sae, ids, mask), evaluate(model, tc, ids, mask)]
    for got, want in zip(
        frame.to_dict("records"), [r for f in alone for r in f.to_dict("records")], strict=True
    ):
        for column in ("l0", "fvu", "ce_spliced", "ce_mean", "kl"):
            assert got[column] == want[column], column
    # SAEs at two layers as one dictionary are spliced together: their CE columns are one number
    pair = SAESet([sae, random_sae("blocks.1.hook_resid_post", seed=3)])
    together = evaluate(model, pair, ids, mask)
    assert together["ce_spliced"].nunique() == 1 and together.iloc[0]["fvu"] == alone[0].iloc[0]["fvu"]


def test_the_old_name_warns_and_gives_the_same_frame():
    model, ids = tiny_model(), tokens(2, 6)
    tc = random_clt(activation="relu")
    with pytest.warns(DeprecationWarning, match="evaluate_transcoders is interp.sae.evaluate now"):
        old = evaluate_transcoders(model, tc, ids)
    assert old.equals(evaluate(model, tc, ids))
