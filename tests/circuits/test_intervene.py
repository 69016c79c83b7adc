"""Feature interventions: constrained ones move what the graph predicts; free ones equal a forward pass (and greedy
generation) with the feature's decoder write changed by hand."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import attribute
from interp.circuits.features import FeatureEdit, generate_with_features, intervene
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders

IDS = torch.tensor([0, 3, 8, 5, 9, 14])


@pytest.fixture(params=["per-layer", "skip", "clt"])
def setup(request):
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, kind=request.param, seed=4)
    return model, tc


def test_constrained_edit_moves_targets_by_the_graph(setup):
    model, tc = setup
    graph = attribute(model, tc, IDS, max_logits=2, progress=False)
    layer0 = (graph.features[:, 0] == 0).nonzero().flatten()
    s = int(layer0[graph.influence()[layer0].argmax()])  # the most influential layer-0 feature
    layer, pos, feat = graph.features[s].tolist()
    a = float(graph.activations[s])
    base = intervene(model, tc, IDS, [], constrained=True)
    for edit, factor in (
        (FeatureEdit(layer, feat, pos, scale=0.0), -1.0),
        (FeatureEdit(layer, feat, pos, value=3 * a), 2.0),
    ):
        moved = intervene(model, tc, IDS, [edit], constrained=True)
        got = torch.stack(
            [
                moved.pre_activations[lay][p, f] - base.pre_activations[lay][p, f]
                for lay, p, f in graph.features.tolist()
            ]
        )
        expected = factor * graph.adjacency[: graph.n_features, s]
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)
        w_u = model.unembed.weight.float()
        dirs = w_u[:, graph.logit_tokens] - w_u.mean(1, keepdim=True)  # [d_model, n_logits]
        logit_moved = (moved.unembed_in[-1] - base.unembed_in[-1]) @ dirs
        torch.testing.assert_close(
            logit_moved, factor * graph.adjacency[-graph.n_logits :, s], atol=1e-5, rtol=1e-4
        )
    assert (expected != 0).any()


def _by_hand_hooks(tc, edits, first: int = 0):
    """Plain-model hooks adding each edit's change of activation times its decoder rows where it writes; an
    edit without a position acts at every position from ``first`` on."""
    inputs = {}

    def read(layer):
        def fn(x, hook):
            inputs[layer] = x

        return fn

    def write(out):
        def fn(x, hook):
            x = x.clone()
            for layer, feat, pos, value in edits:
                if out not in tc.output_layers(layer):
                    continue
                where = slice(first, None) if pos is None else slice(pos, pos + 1)
                act = tc.encode(inputs[layer], layer)[1][:, where, feat]  # [batch, n]
                row = tc.decoder(layer)[feat, tc.output_layers(layer).index(out)]
                x[:, where] += ((value - act)[..., None] * row).to(x.dtype)
            return x

        return fn

    hooks = [(tc.input_hook(layer), read(layer)) for layer in tc.layers]
    return hooks + [(tc.output_hook(out), write(out)) for out in range(tc.n_layers)]


def test_free_edit_is_a_forward_with_the_decoder_write_changed(setup):
    model, tc = setup
    edits = [(0, 5, 2, 4.0), (1, 7, 4, 0.0)]
    got = intervene(model, tc, IDS, [FeatureEdit(lay, f, p, value=v) for lay, f, p, v in edits])
    with torch.no_grad():
        expected = model.run_with_hooks(IDS[None], fwd_hooks=_by_hand_hooks(tc, edits))[0]
    torch.testing.assert_close(got.logits, expected.float(), atol=1e-5, rtol=1e-5)
    plain = model(IDS[None])[0]
    assert (got.logits - plain).abs().max() > 1e-3  # the edit does something


def test_generate_with_clamped_features_also_at_generated_positions(setup):
    model, tc = setup
    edits = [(0, 3, None, 5.0)]  # every position, generated ones included
    got = generate_with_features(model, tc, IDS, [FeatureEdit(0, 3, value=5.0)], 4, stop_at_eos=False).tokens[
        0
    ]
    ids = IDS.clone()
    hooks = _by_hand_hooks(tc, edits)
    with torch.no_grad():
        for _ in range(4):
            nxt = model.run_with_hooks(ids[None], fwd_hooks=hooks)[0, -1].argmax()
            ids = torch.cat([ids, nxt[None]])
    assert got.tolist() == ids.tolist()


def test_bad_edits():
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg)
    with pytest.raises(ValueError, match="exactly one"):
        FeatureEdit(0, 1, 2)
    with pytest.raises(ValueError, match="feature 99; layer 0 has 24 features"):
        intervene(model, tc, IDS, [FeatureEdit(0, 99, 1, value=1.0)])
    with pytest.raises(ValueError, match="layers \\[0, 1\\]"):
        intervene(model, tc, IDS, [FeatureEdit(5, 1, 1, value=1.0)])
