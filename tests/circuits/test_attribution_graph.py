"""AttributionGraph as data: influence, pruning and scores on a graph built by hand, files, graph.json, bad input."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from interp.analysis.node import Node
from interp.circuits import AttributionGraph, Target, attribute
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders


def hand_graph() -> AttributionGraph:
    """One layer, two positions; features f0, f1 at position 1; the logit reads f0 (3) and f1 (1); f0 reads
    token 1 and error 1 equally (2, -2), f1 reads token 0 (1).

    Influence on the logit: f0 3/4, f1 1/4, then token 1 and error 1 3/8 each, token 0 1/4.
    """
    n = 2 + 2 + 2 + 1  # features, errors (1 layer x 2 positions), tokens, logit
    a = torch.zeros(n, n)
    f0, f1, err1, tok0, tok1, logit = 0, 1, 3, 4, 5, 6
    a[logit, f0], a[logit, f1] = 3.0, -1.0
    a[f0, tok1], a[f0, err1] = 2.0, -2.0
    a[f1, tok0] = 1.0
    return AttributionGraph(
        adjacency=a,
        features=torch.tensor([[0, 1, 7], [0, 1, 9]]),
        activations=torch.tensor([1.5, 0.5]),
        input_tokens=torch.tensor([0, 11]),
        logit_tokens=torch.tensor([13]),
        logit_probabilities=torch.tensor([1.0]),
        n_layers=1,
        logit_labels=("x",),
        metadata={"prompt": "<b>&'\""},
    )


def test_nodes_in_circuit_tracers_order():
    g = hand_graph()
    assert g.nodes == ("L0.F7@1", "L0.F9@1", "L0.error@0", "L0.error@1", "token@0", "token@1", "logit.0")
    assert [n.kind for n in g.nodes] == ["feature"] * 2 + ["error"] * 2 + ["token"] * 2 + ["logit"]
    assert g.edge("logit.0", Node.feature_node(0, 1, 7)) == 3.0
    with pytest.raises(KeyError, match="no node 'L0.F8@1'"):
        g.index("L0.F8@1")


def test_influence_and_scores_by_hand():
    g = hand_graph()
    torch.testing.assert_close(g.influence(), torch.tensor([0.75, 0.25, 0.0, 0.375, 0.25, 0.375, 0.0]))
    replacement, completeness = g.scores()
    assert replacement == pytest.approx(0.625)  # tokens 5/8 over tokens and errors 1
    # rows' non-error shares (f0: 1/2, every other row: 1) weighted by influence plus the logit's weight
    assert completeness == pytest.approx((0.5 * 0.75 + 0.25 + 0.375 + 0.25 + 0.375 + 1.0) / 3.0)


def test_prune_by_hand():
    g = hand_graph()
    pruned = g.prune(node_threshold=0.8, edge_threshold=0.98)
    # sorted influences .75 .375 .375 .25 .25: 0.8 of the total is reached at the fourth, so >= .25 stays
    assert pruned.node_mask.tolist() == [True, True, False, True, True, True, True]
    kept = {(str(g.nodes[t]), str(g.nodes[s])) for t, s in pruned.edge_mask.nonzero().tolist()}
    assert kept == {("logit.0", "L0.F7@1"), ("logit.0", "L0.F9@1"), ("L0.F7@1", "token@1"),
                    ("L0.F7@1", "L0.error@1"), ("L0.F9@1", "token@0")}  # fmt: skip
    # a tighter node threshold drops f1, then token 0 keeps no edge but stays (tokens always do)
    tight = g.prune(node_threshold=0.5, edge_threshold=1.0)
    assert tight.node_mask.tolist() == [True, False, False, True, True, True, True]
    with pytest.raises(ValueError, match="node_threshold must be within"):
        g.prune(node_threshold=1.5)


def test_files_round_trip_and_graph_json(tmp_path):
    g = hand_graph()
    g.save(tmp_path)
    tensors = load_file(str(tmp_path / "graph.safetensors"))
    assert set(tensors) == {
        "adjacency", "features", "activations", "input_tokens", "logit_tokens", "logit_probabilities"
    }  # fmt: skip
    assert tensors["adjacency"].dtype == torch.float32 and tensors["features"].dtype == torch.int64
    back = AttributionGraph.load(tmp_path)
    assert torch.equal(back.adjacency, g.adjacency) and back.nodes == g.nodes
    assert back.logit_labels == g.logit_labels and back.metadata["prompt"] == g.metadata["prompt"]
    doc = json.loads((tmp_path / "graph.json").read_text())
    assert set(doc) == {"metadata", "qParams", "nodes", "links", "interp"}
    # the extension holds only the save's generation, the one graph.safetensors carries and the record lists
    record = json.loads((tmp_path / "graph-manifest.json").read_text())
    with safe_open(str(tmp_path / "graph.safetensors"), "pt") as f:
        generation = f.metadata()["generation"]
    assert doc["interp"] == {"version": 1, "generation": generation} and record["generation"] == generation
    for key in (
        "slug",
        "scan",
        "transcoder_list",
        "prompt_tokens",
        "prompt",
        "node_threshold",
        "schema_version",
    ):
        assert key in doc["metadata"]
    assert set(doc["qParams"]) == {"pinnedIds", "supernodes", "linkType", "clickedId", "sg_pos"}
    node_keys = {"node_id", "feature", "layer", "ctx_idx", "feature_type", "token_prob", "is_target_logit",
                 "run_idx", "reverse_ctx_idx", "jsNodeId", "clerp", "influence", "activation"}  # fmt: skip
    assert all(node_keys <= set(n) for n in doc["nodes"])
    assert sorted(n["uid"] for n in doc["nodes"]) == sorted(
        ["L0.F7@1", "L0.F9@1", "L0.error@1", "token@0", "token@1", "logit.0"]
    )
    ids = {n["node_id"] for n in doc["nodes"]}
    assert ids == {"0_7_1", "0_9_1", "0_0_1", "E_0_0", "E_11_1", "2_13_1"}  # error 0 was pruned
    assert all(link["source"] in ids and link["target"] in ids for link in doc["links"])
    weights = {(link["source"], link["target"]): link["weight"] for link in doc["links"]}
    assert weights[("0_7_1", "2_13_1")] == 3.0 and weights[("0_0_1", "0_7_1")] == -2.0
    with pytest.raises(FileNotFoundError, match="graph.safetensors"):
        AttributionGraph.load(tmp_path / "missing")


def test_bad_input_is_one_clear_line():
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg)
    ids = torch.tensor([0, 3, 4, 5])
    with pytest.raises(ValueError, match="max_feature_nodes must be a positive integer"):
        attribute(model, tc, ids, max_feature_nodes=0)
    with pytest.raises(ValueError, match="context is n_ctx=12"):
        attribute(model, tc, torch.arange(13) % 5)
    other = tiny("llama-gqa", n_layers=3)
    with pytest.raises(ValueError, match=r"features at layers \[0, 1\] only, not at all 3"):
        attribute(other, tc, ids)
    with pytest.raises(ValueError, match="d_in=16 at .* width 32"):
        attribute(tiny("llama-gqa", d_model=32, n_heads=4), tc, ids)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        attribute(model, tc, ids, targets=[999], progress=False)


def test_custom_direction_target_is_a_logit_difference():
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=2)
    ids = torch.tensor([0, 3, 4, 5, 9])
    diff = Target.difference(model, 7, 4)
    both = attribute(model, tc, ids, targets=[7, 4], progress=False)
    one = attribute(model, tc, ids, targets=[diff], progress=False)
    assert one.logit_tokens.tolist() == [-1] and one.logit_labels == ("7-4",)
    # de-meaning cancels in a difference: the direction's row is the difference of the two tokens' rows
    torch.testing.assert_close(one.adjacency[-1, :-1], both.adjacency[-2, :-2] - both.adjacency[-1, :-2])


def test_nothing_stays_attached():
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=2)
    ids = torch.tensor([0, 3, 4, 5, 9])
    before = model(ids[None])
    attribute(model, tc, ids, progress=False)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        attribute(model, tc, ids, targets=[10_000], progress=False)
    assert not any(point.active for point in model.hook_dict.values())
    torch.testing.assert_close(model(ids[None]), before, rtol=0, atol=0)
