"""Circuit nodes as values: formatted once, parsed once, equal to their names."""

from __future__ import annotations

import json
import pickle

import pytest

from interp.circuits import Graph
from interp.circuits.node import Node

EXAMPLES = [
    (Node.input(), "input", {}),
    (Node.logits(), "logits", {}),
    (Node.head_node(3, 2), "L3.H2", {"kind": "head", "layer": 3, "head": 2}),
    (Node.mlp(0), "L0.MLP", {"kind": "mlp", "layer": 0}),
    (Node.query(1, 7), "L1.H7.q", {"kind": "query", "layer": 1, "head": 7}),
    (Node.key(2, 1), "L2.KV1.k", {"kind": "key", "layer": 2, "group": 1}),
    (Node.value(2, 0), "L2.KV0.v", {"kind": "value", "layer": 2, "group": 0}),
    (
        Node.feature_node(4, 5, 417),
        "L4.F417@5",
        {"kind": "feature", "layer": 4, "position": 5, "feature": 417},
    ),
    (Node.error(4, 5), "L4.error@5", {"kind": "error", "layer": 4, "position": 5}),
    (Node.token(9), "token@9", {"kind": "token", "position": 9, "layer": None}),
    (Node.logit(2), "logit.2", {"kind": "logit", "target": 2}),
]


@pytest.mark.parametrize(("node", "text", "fields"), EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_formats_and_parses_back(node, text, fields):
    assert node == text and str(node) == text and hash(node) == hash(text)
    parsed = Node.parse(text)
    assert parsed == node
    for name in ("kind", "layer", "head", "group", "position", "feature", "target"):
        assert getattr(parsed, name) == getattr(node, name)
    for name, value in fields.items():
        assert getattr(node, name) == value
    assert pickle.loads(pickle.dumps(node)).kind == node.kind
    assert json.loads(json.dumps([node])) == [text]


def test_immutable_and_bad_text():
    node = Node.head_node(0, 1)
    with pytest.raises(AttributeError, match="immutable"):
        node.layer = 3
    for bad in ("L0.H", "L0.KV1.q", "blocks.0", "L1.F3", "token5"):
        with pytest.raises(ValueError, match="names no node"):
            Node.parse(bad)


def test_graph_hands_out_nodes():
    g = Graph(n_layers=2, n_heads=4, n_kv_heads=2)
    assert all(isinstance(n, Node) for n in (*g.nodes, *g.inputs))
    assert [n.kind for n in g.inputs[:9]] == ["query"] * 4 + ["key"] * 2 + ["value"] * 2 + ["mlp"]
    assert g.heads_of("L1.KV1.v") == ["L1.H2", "L1.H3"]
    assert [n.head for n in g.heads_of(Node.key(0, 0))] == [0, 1]
