"""Subgraphs travel: pinned nodes and supernodes go into the file's qParams (Neuronpedia ids) and the interp
extension (interp's names), load back identically, read back from either naming, and a supernode is ablated or
scaled, constrained or free, in one call."""

from __future__ import annotations

import json

import pytest
import torch

from interp.analysis.node import Node
from interp.circuits import AttributionGraph, attribute
from interp.circuits.features import FeatureEdit, intervene
from interp.circuits.features.subgraph import Subgraph, neuronpedia_ids, read_subgraph
from tests.circuits.transcoders import family_model, input_site, tiny_transcoders

TOKENS = torch.tensor([0, 5, 17, 9, 33, 2, 41])


@pytest.fixture(scope="module")
def setup():
    model = family_model("llama3-rope")
    tc = tiny_transcoders(model.cfg, kind="skip", seed=3, input_site=input_site(model))
    graph = attribute(model, tc, TOKENS, max_logits=2, progress=False)
    return model, tc, graph


def _features(graph, n, layer=None):
    return [str(x) for x in graph.nodes if x.kind == "feature" and (layer is None or x.layer == layer)][:n]


def test_saved_subgraph_loads_back_identically(setup, tmp_path):
    model, _, graph = setup
    f = _features(graph, 5)
    sub = graph.subgraph(
        pinned=["token@3", f[0]], supernodes={"group a": f[1:3], "group b": [f[3], "L0.error@4"]}
    )
    assert sub.selection == Subgraph(
        pinned=("token@3", f[0], f[1], f[2], f[3], "L0.error@4"),
        supernodes=(("group a", (f[1], f[2])), ("group b", (f[3], "L0.error@4"))),
    )
    assert graph.selection is None  # the graph itself is unchanged
    sub.save(tmp_path, model=model)
    back = AttributionGraph.load(tmp_path)
    assert back.selection == sub.selection
    assert torch.equal(back.adjacency, graph.adjacency)
    doc = json.loads((tmp_path / "graph.json").read_text())
    ids = neuronpedia_ids(graph, model.cfg.d_vocab)
    assert doc["qParams"]["pinnedIds"] == [ids[n] for n in sub.selection.pinned]
    assert doc["qParams"]["supernodes"] == [
        ["group a", ids[f[1]], ids[f[2]]],
        ["group b", ids[f[3]], ids["L0.error@4"]],
    ]
    assert doc["interp"]["subgraph"] == {
        "pinned": list(sub.selection.pinned),
        "supernodes": [["group a", f[1], f[2]], ["group b", f[3], "L0.error@4"]],
    }
    # the file reads back as the same subgraph, from the extension or from qParams' Neuronpedia ids alone
    assert read_subgraph(tmp_path / "graph.json", graph, model.cfg.d_vocab) == sub.selection
    plain = tmp_path / "qparams.json"
    g = _features(graph, 3, layer=1)  # ids no error shares
    plain.write_text(json.dumps({"pinnedIds": [ids[n] for n in g[:2]], "supernodes": [["a", ids[g[2]]]]}))
    assert read_subgraph(plain, graph, model.cfg.d_vocab) == Subgraph(tuple(g), (("a", (g[2],)),))
    # an error's id is also a layer-0 feature's: such an id is refused, naming both
    plain.write_text(json.dumps({"pinnedIds": ["0_0_1"]}))
    with pytest.raises(
        ValueError, match="'0_0_1' is the Neuronpedia id of L0.F0@1 and L0.error@1; name the node"
    ):
        read_subgraph(plain, graph, model.cfg.d_vocab)


def test_bad_subgraphs_are_refused(setup, tmp_path):
    _, _, graph = setup
    f = _features(graph, 3)
    with pytest.raises(KeyError, match="the graph has no node 'L1.F9999@2'"):
        graph.subgraph(pinned=["L1.F9999@2"])
    with pytest.raises(ValueError, match="'nonsense' is not a node of the graph"):
        graph.subgraph(pinned=["nonsense"])
    with pytest.raises(ValueError, match=f"{f[0]} is in supernodes 'a' and 'b'; a node joins one supernode"):
        graph.subgraph(supernodes={"a": [f[0]], "b": [f[0], f[1]]})
    with pytest.raises(ValueError, match="a supernode needs a name"):
        graph.subgraph(supernodes=[[" ", f[0]]])
    with pytest.raises(ValueError, match=r"a supernode is \[name, node, ...\] with at least one node"):
        graph.subgraph(supernodes=[["only a name"]])
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="is not JSON"):
        read_subgraph(tmp_path / "bad.json", graph)
    (tmp_path / "empty.json").write_text("{}")
    with pytest.raises(ValueError, match="has neither pinnedIds nor supernodes"):
        read_subgraph(tmp_path / "empty.json", graph)


@pytest.mark.parametrize("constrained", [True, False])
def test_a_supernode_is_intervened_on_in_one_call(setup, constrained):
    model, tc, graph = setup
    members = _features(graph, 3, layer=0)
    sub = graph.subgraph(supernodes={"early": members})
    edits = [FeatureEdit(n.layer, n.feature, n.position, scale=0.0) for n in map(Node.parse, members)]
    got = sub.intervene(model, tc, supernode="early", scale=0.0, constrained=constrained)
    want = intervene(model, tc, TOKENS, edits, constrained=constrained)
    assert torch.equal(got.logits, want.logits)
    clean = intervene(model, tc, TOKENS, [], constrained=constrained)
    assert not torch.allclose(got.logits, clean.logits)
    if (
        constrained
    ):  # ablating the members moves each later feature's pre-activation by minus their edges into it
        later = [i for i, n in enumerate(graph.nodes) if n.kind == "feature" and n.layer == 1]
        cols = [graph.index(n) for n in members]
        for i in later[:10]:
            node = graph.nodes[i]
            moved = (
                got.pre_activations[1][node.position, node.feature]
                - clean.pre_activations[1][node.position, node.feature]
            )
            expected = -graph.adjacency[i, cols].double().sum()
            assert float(moved) == pytest.approx(float(expected), abs=1e-5, rel=1e-4)
    doubled = sub.intervene(model, tc, supernode="early", scale=2.0, constrained=constrained)
    assert not torch.equal(doubled.logits, got.logits)
    with pytest.raises(KeyError, match="the graph has no supernode 'late'; it has \\['early'\\]"):
        sub.intervene(model, tc, supernode="late", scale=0.0)
    with pytest.raises(ValueError, match="sets scale or value, exactly one"):
        sub.intervene(model, tc, supernode="early")
    with pytest.raises(ValueError, match=r"holds L0.error@3 \(error\); only feature nodes can be edited"):
        graph.subgraph(supernodes={"e": ["L0.error@3"]}).intervene(model, tc, supernode="e", scale=0.0)
