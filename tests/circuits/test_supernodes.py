"""Automatic supernodes recover planted groups, and only them: members at one position with aligned decoders
and interchangeable effects; decoys that meet two criteria of three stay apart; the collapsed graph keeps its
influence within the tolerance, and a tolerance a group cannot meet dissolves it."""

from __future__ import annotations

import pytest
import torch

from interp.circuits import AttributionGraph
from interp.circuits.features.supernodes import collapse, propose_supernodes
from interp.sae.transcoder import TranscoderSet

N_LAYERS, N_POS, D, F = 3, 5, 32, 12
PER_CELL = 6  # active features per (layer, position): 0..5
PLANTED = [(1, 2, (0, 1, 2)), (0, 3, (3, 4))]  # (layer, position, features)


def _planted(seed: int = 0):
    """A graph and transcoders with planted groups, a decoy with aligned decoders only (layer 0, features 0 and
    1, aligned at every position, effects apart) and a decoy with aligned effects only (layer 1, position 1,
    features 3 and 5, decoders orthogonal)."""
    g = torch.Generator().manual_seed(seed)
    w_dec = torch.randn(N_LAYERS, F, D, generator=g)
    for layer, _, members in PLANTED:
        base = torch.randn(D, generator=g)
        for k in members:
            w_dec[layer, k] = base + 0.1 * torch.randn(D, generator=g)
    w_dec[0, 1] = w_dec[0, 0] + 0.05 * torch.randn(D, generator=g)
    w_dec[1, 5] = w_dec[1, 5] - (w_dec[1, 5] @ w_dec[1, 3]) / (w_dec[1, 3] @ w_dec[1, 3]) * w_dec[1, 3]
    tc = TranscoderSet(
        torch.randn(N_LAYERS, F, D, generator=g), w_dec, torch.zeros(N_LAYERS, F), torch.zeros(N_LAYERS, D)
    )
    features = torch.tensor(
        [(lay, p, k) for lay in range(N_LAYERS) for p in range(1, N_POS) for k in range(PER_CELL)]
    )
    n_f = len(features)
    layer_of = torch.cat(
        [
            features[:, 0],
            torch.arange(N_LAYERS).repeat_interleave(N_POS),  # errors
            torch.full((N_POS,), -1),  # tokens
            torch.full((2,), N_LAYERS),  # logits
        ]
    )
    n = len(layer_of)
    mask = (layer_of[:, None] > layer_of[None, :]) & (torch.rand(n, n, generator=g) < 0.5)
    adjacency = torch.randn(n, n, generator=g).abs() * mask
    adjacency[n_f : n - 2] = 0  # nothing is attributed into errors and tokens
    adjacency[:, n - 2 :] = 0
    index = {tuple(f): i for i, f in enumerate(features.tolist())}
    for layer, pos, members in [*PLANTED, (1, 1, (3, 5))]:
        column = torch.randn(n, generator=g).abs() * (layer_of > layer) * (torch.rand(n, generator=g) < 0.7)
        column[n_f : n - 2] = 0
        for k in members:
            scale = 0.5 + torch.rand(1, generator=g)
            adjacency[:, index[(layer, pos, k)]] = scale * column + 0.02 * torch.rand(n, generator=g) * (
                column > 0
            )
    graph = AttributionGraph(
        adjacency=adjacency,
        features=features,
        activations=torch.ones(n_f),
        input_tokens=torch.arange(N_POS),
        logit_tokens=torch.tensor([3, 4]),
        logit_probabilities=torch.tensor([0.6, 0.3]),
        n_layers=N_LAYERS,
    )
    return graph, tc


def test_planted_groups_are_recovered_and_decoys_stay_apart():
    graph, tc = _planted()
    proposal = propose_supernodes(graph, tc)
    found = sorted(sorted(members) for _, members in proposal.groups)
    expected = sorted(sorted(f"L{lay}.F{k}@{p}" for k in ks) for lay, p, ks in PLANTED)
    assert found == expected
    assert proposal.influence_kept >= 1 - proposal.criterion["tolerance"]
    assert proposal.n_units == proposal.n_nodes - 3
    assert proposal.report()["n_groups"] == 2

    # the decoys meet the criteria they were built to meet and miss another
    def cos(a, b):
        return float(torch.nn.functional.cosine_similarity(a, b, dim=0))

    def decoder(layer, k):
        return tc.decoder(layer, torch.tensor([k]))[0, 0].detach()

    def effect(name):
        return graph.adjacency[:, graph.index(name)]

    assert cos(decoder(0, 0), decoder(0, 1)) > 0.9 and cos(effect("L0.F0@1"), effect("L0.F1@1")) < 0.8
    assert abs(cos(decoder(1, 3), decoder(1, 5))) < 1e-5 and cos(effect("L1.F3@1"), effect("L1.F5@1")) > 0.9
    # named by where they are
    assert {name.split(" ")[0] for name, _ in proposal.groups} == {"L1@2", "L0@3"}


def test_a_tolerance_no_group_meets_dissolves_the_groups():
    graph, tc = _planted()
    full = propose_supernodes(graph, tc)
    assert full.influence_kept < 1.0  # summing members moves some influence
    none = propose_supernodes(graph, tc, tolerance=0.0)
    assert none.groups == () and none.influence_kept == pytest.approx(1.0, abs=1e-6)


def test_collapse_sums_edges_into_units():
    a = torch.arange(16.0).view(4, 4)
    collapsed, unit = collapse(a, [[1, 3]])
    assert unit.tolist() == [0, 1, 2, 1]
    expected = torch.tensor([[0.0, 1 + 3, 2], [4 + 12, 5 + 7 + 13 + 15, 6 + 14], [8, 9 + 11, 10]])
    assert torch.equal(collapsed, expected)


def test_bad_settings_are_refused():
    graph, tc = _planted()
    with pytest.raises(ValueError, match="effect_cosine must be within \\[-1, 1\\], got 2"):
        propose_supernodes(graph, tc, effect_cosine=2)
    with pytest.raises(ValueError, match="tolerance must be within \\[0, 1\\], got -0.1"):
        propose_supernodes(graph, tc, tolerance=-0.1)
    with pytest.raises(ValueError, match="supernodes group feature nodes; token@1 is a token node"):
        propose_supernodes(graph, tc, candidates=["token@1"])


def test_proposals_saved_for_the_viewer_are_named_as_awaiting_a_decision(tmp_path):
    import json

    from interp.circuits.features.reading import readable

    graph, tc = _planted()
    proposal = propose_supernodes(graph, tc)
    # every node a candidate, as propose_supernodes has it
    kept = {"node_threshold": 1.0, "edge_threshold": 1.0}
    grouped, _, report = readable(graph, None, tc, supernodes="auto", **kept)
    names = [name for name, _ in proposal.groups]
    assert len(names) == 2 and report["proposed"] == names
    assert [name for name, _ in grouped.selection.supernodes] == names
    # a reader's own group from --subgraph is not a proposal, and the proposal it overlaps is left out
    (first, members), (second, _) = proposal.groups
    own = tmp_path / "own.json"
    own.write_text(json.dumps({"pinnedIds": [], "supernodes": [["mine", members[0]]]}))
    grouped, _, report = readable(graph, None, tc, supernodes="auto", subgraph=own, **kept)
    assert report["proposed"] == [second]
    assert [name for name, _ in grouped.selection.supernodes] == ["mine", second]
