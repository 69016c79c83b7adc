"""Node values: formatted once, parsed once, equal to their names; one type for graphs and stream parts."""

from __future__ import annotations

import json
import pickle
from typing import get_args

import pytest

from interp.analysis.node import Kind, Node

FIELDS = ("kind", "layer", "head", "group", "position", "source", "feature", "target", "expert", "name")

EXAMPLES = [
    (Node.input(), "input", {}),
    (Node.output(), "logits", {"kind": "output"}),
    (Node.head_node(3, 2), "L3.H2", {"kind": "head", "layer": 3, "head": 2, "position": None}),
    (Node.head_node(3, 2, 5), "L3.H2@5", {"kind": "head", "position": 5, "source": None}),
    (Node.head_node(3, 2, 5, 1), "L3.H2@5<-1", {"kind": "head", "head": 2, "position": 5, "source": 1}),
    (Node.attn_bias(2), "L2.b_O", {"kind": "attn_bias", "layer": 2}),
    (Node.mlp(0), "L0.MLP", {"kind": "mlp", "layer": 0}),
    (Node.mlp(0, 4), "L0.MLP@4", {"kind": "mlp", "layer": 0, "position": 4}),
    (Node.expert_node(3, 5), "L3.E5", {"kind": "expert", "layer": 3, "expert": 5, "position": None}),
    (Node.shared_expert(3), "L3.SE", {"kind": "shared", "layer": 3, "expert": None}),
    (Node.query(1, 7), "L1.H7.q", {"kind": "query", "layer": 1, "head": 7}),
    (Node.key(2, 1), "L2.KV1.k", {"kind": "key", "layer": 2, "group": 1}),
    (Node.value(2, 0), "L2.KV0.v", {"kind": "value", "layer": 2, "group": 0}),
    (
        Node.feature_node(4, 5, 417),
        "L4.F417@5",
        {"kind": "feature", "layer": 4, "position": 5, "feature": 417},
    ),
    (Node.error(4, 5), "L4.error@5", {"kind": "error", "layer": 4, "position": 5}),
    (Node.decoder_bias(4), "L4.b_dec", {"kind": "tc_bias", "layer": 4}),
    (Node.skip(4, 5), "L4.skip@5", {"kind": "skip", "layer": 4, "position": 5}),
    (Node.token(9), "token@9", {"kind": "token", "position": 9, "layer": None}),
    (Node.token(), "token", {"kind": "token", "position": None}),
    (Node.pos_embed(9), "pos@9", {"kind": "pos_embed", "position": 9}),
    (Node.pos_embed(), "pos", {"kind": "pos_embed", "position": None}),
    (Node.bias("ln1.b", 2), "L2.ln1.b", {"kind": "bias", "layer": 2, "name": "ln1.b"}),
    (Node.bias("embed_ln.b"), "embed_ln.b", {"kind": "bias", "layer": None, "name": "embed_ln.b"}),
    (Node.bias("b_Q"), "b_Q", {"kind": "bias", "name": "b_Q"}),
    (Node.logit(2), "logit.2", {"kind": "logit", "target": 2}),
    (Node.rest(), "bias", {"kind": "rest", "layer": None, "name": None}),
]


@pytest.mark.parametrize(("node", "text", "fields"), EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_formats_and_parses_back(node, text, fields):
    assert node == text and str(node) == text and hash(node) == hash(text)
    parsed = Node.parse(text)
    assert parsed == node
    for name in FIELDS:
        assert getattr(parsed, name) == getattr(node, name)
    for name, value in fields.items():
        assert getattr(node, name) == value
    assert pickle.loads(pickle.dumps(node)).kind == node.kind
    assert json.loads(json.dumps([node])) == [text]


def test_every_kind_has_an_example():
    assert {node.kind for node, _, _ in EXAMPLES} == set(get_args(Kind))


LABELS = [
    (Node.head_node(3, 4, 8, 2, shown=" tired"), 'L3H4@" tired"'),
    (Node.head_node(3, 4, 8), "L3H4"),
    (Node.attn_bias(3), "L3 b_O"),
    (Node.mlp(7, 2, shown=" it"), 'MLP7@" it"'),
    (Node.expert_node(3, 5), "L3E5"),
    (Node.shared_expert(3), "L3SE"),
    (Node.feature_node(3, 2, 417, shown="x"), 'feature 3/417@"x"'),
    (Node.error(3, 2, shown="x"), 'MLP3 error@"x"'),
    (Node.decoder_bias(3), "MLP3 b_dec"),
    (Node.skip(3, 2, shown="x"), 'MLP3 skip@"x"'),
    (Node.token(2, shown=" it"), 'embed@" it"'),
    (Node.pos_embed(2, shown=" it"), 'pos@" it"'),
    (Node.bias("ln1.b", 2), "L2 ln1.b"),
    (Node.bias("b_K"), "b_K"),
    (Node.key(2, 1), "L2.KV1.k"),
    (Node.logit(0), "logit.0"),
    (Node.rest(), "bias"),
]


@pytest.mark.parametrize(("node", "label"), LABELS, ids=[label for _, label in LABELS])
def test_labels_for_people(node, label):
    assert node.label == label


def test_what_a_label_shows_is_not_part_of_the_name():
    a, b = Node.head_node(1, 0, 4, 2, shown=" cat"), Node.head_node(1, 0, 4, 2, shown=" dog")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    both = a.showing(" cat| dog")
    assert both == a and both.label == 'L1H0@" cat| dog"' and (both.position, both.source) == (4, 2)
    assert pickle.loads(pickle.dumps(a)).shown == " cat"
    assert Node.parse(str(a)).shown == ""  # the text names the node; what it shows is not in it


def test_immutable_and_bad_text():
    node = Node.head_node(0, 1)
    with pytest.raises(AttributeError, match="immutable"):
        node.layer = 3
    for bad in (
        "L0.H",
        "L0.KV1.q",
        "blocks.0",
        "L1.F3",
        "token5",
        "L0.H1<-2",
        "L0.error",
        "pos@",
        "L0.b_X",
        "L0.E",
        "L0.SE1",
        "L0.E2@3",
    ):
        with pytest.raises(ValueError, match="names no node"):
            Node.parse(bad)
    with pytest.raises(ValueError, match="needs the position"):
        Node.head_node(0, 1, source=2)
    with pytest.raises(ValueError, match="bias name 'W_Q'"):
        Node.bias("W_Q")
