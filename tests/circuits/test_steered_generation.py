"""Generation with feature edits as Neuronpedia's graph server steers: edits at the generated positions only,
and the prompt's attention patterns held at their unedited values (circuit-tracer's ``freeze_attention``),
each against a step-by-step loop over plain forward passes with the edits and held patterns written by hand;
and attribution's progress report, which is where a server stops a graph."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import attribute
from interp.circuits.features import FeatureEdit, generate_with_features, intervene
from tests.circuits.models import tiny
from tests.circuits.test_intervene import _by_hand_hooks
from tests.circuits.transcoders import tiny_transcoders

IDS = torch.tensor([0, 3, 8, 5, 9, 14])
STEPS = 4


@pytest.fixture(scope="module", params=["per-layer", "clt"])
def setup(request):
    model = tiny("llama-gqa")
    return model, tiny_transcoders(model.cfg, kind=request.param, seed=4)


def _held(model, prompt):
    """Hooks putting the prompt's clean pattern rows back, written from the definition."""
    names = [n for n in model.hook_names() if n.endswith("attn.hook_pattern")]
    _, clean = model.run_with_cache(prompt[None], names_filter=names)
    p = len(prompt)

    def fn(pattern, hook):
        out = pattern.clone()
        out[:, :, :p] = 0.0
        out[:, :, :p, :p] = clean[hook.name]
        return out

    return [(n, fn) for n in names]


def _by_hand(model, hooks):
    ids, logits = IDS.clone(), []
    with torch.no_grad():
        for _ in range(STEPS):
            last = model.run_with_hooks(ids[None], fwd_hooks=hooks)[0, -1]
            logits.append(last)
            ids = torch.cat([ids, last.argmax()[None]])
    return ids, torch.stack(logits)


def test_an_edit_at_the_generated_positions_leaves_the_prompt_alone(setup):
    model, tc = setup
    edit = FeatureEdit(0, 3, value=5.0, generated=True)
    got = generate_with_features(model, tc, IDS, [edit], STEPS, stop_at_eos=False, return_logits=True)
    ids, logits = _by_hand(model, _by_hand_hooks(tc, [(0, 3, None, 5.0)], first=len(IDS)))
    assert got.tokens[0].tolist() == ids.tolist()
    torch.testing.assert_close(got.logits[0], logits, atol=1e-4, rtol=1e-4)
    plain = model(IDS[None])[0, -1]  # the first step predicts from the prompt alone: unedited
    torch.testing.assert_close(got.logits[0, 0], plain, atol=1e-4, rtol=1e-4)
    assert (
        ids.tolist()
        != generate_with_features(model, tc, IDS, [], STEPS, stop_at_eos=False).tokens[0].tolist()
    )


def test_holding_the_prompts_attention(setup):
    model, tc = setup
    held = generate_with_features(
        model, tc, IDS, [], STEPS, stop_at_eos=False, hold_attention=True, return_logits=True
    )
    free = generate_with_features(model, tc, IDS, [], STEPS, stop_at_eos=False, return_logits=True)
    assert held.tokens.tolist() == free.tokens.tolist()  # holding the unedited patterns of an unedited run
    torch.testing.assert_close(held.logits, free.logits, atol=1e-5, rtol=1e-5)
    edits = [(0, 5, 2, 4.0), (1, 7, 4, 0.0)]
    got = generate_with_features(
        model,
        tc,
        IDS,
        [FeatureEdit(lay, f, p, value=v) for lay, f, p, v in edits],
        STEPS,
        stop_at_eos=False,
        hold_attention=True,
        return_logits=True,
    )
    ids, logits = _by_hand(model, _by_hand_hooks(tc, edits) + _held(model, IDS))
    assert got.tokens[0].tolist() == ids.tolist()
    torch.testing.assert_close(got.logits[0], logits, atol=1e-4, rtol=1e-4)
    _, moving = _by_hand(model, _by_hand_hooks(tc, edits))  # the same edits with attention free
    assert (moving[0] - logits[0]).abs().max() > 1e-4  # holding the patterns changes the result


def test_edits_at_generated_positions_are_refused_outside_generation():
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg)
    with pytest.raises(ValueError, match="has no position of its own"):
        FeatureEdit(0, 1, 2, value=1.0, generated=True)
    with pytest.raises(ValueError, match="use generate_with_features"):
        intervene(model, tc, IDS, [FeatureEdit(0, 1, value=1.0, generated=True)])


def test_attribution_reports_progress_and_stops_where_the_report_raises():
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=2)
    seen = []
    graph = attribute(
        model, tc, IDS, max_logits=2, batch_size=4, progress=lambda done, total: seen.append((done, total))
    )
    plain = attribute(model, tc, IDS, max_logits=2, batch_size=4, progress=False)
    assert torch.equal(graph.adjacency, plain.adjacency)
    total = len(graph.features)
    assert seen[0] == (0, total) and seen[-1] == (total, total) and len(seen) == 1 + -(-total // 4)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)

    class Stop(Exception):
        pass

    calls = []

    def stop_after_one(done, total):
        calls.append(done)
        if done:
            raise Stop

    with pytest.raises(Stop):
        attribute(model, tc, IDS, max_logits=2, batch_size=4, progress=stop_after_one)
    assert calls == [0, 4]  # stopped after the first backward pass of features
