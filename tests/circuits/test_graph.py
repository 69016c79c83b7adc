"""The graph as data: names, edge counts by an independent enumeration, structures it refuses, JSON."""

import json

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from interp.circuits import Graph, GraphStructureError, Node, UnknownNameError
from interp.circuits.graph import SUPPORTED_PLACEMENTS
from tests.circuits.models import tiny


def enumerate_edges(n_layers, n_heads, n_kv, parallel):
    """Every edge from the definition: an input of layer l reads the input node and all nodes of earlier
    layers; a sequential MLP also reads its own layer's heads."""
    earlier = ["input"]
    edges = []
    for layer in range(n_layers):
        heads = [f"L{layer}.H{h}" for h in range(n_heads)]
        inputs = [f"L{layer}.H{h}.q" for h in range(n_heads)]
        inputs += [f"L{layer}.KV{g}.{kv}" for kv in "kv" for g in range(n_kv)]
        edges += [(s, t) for t in inputs for s in earlier]
        edges += [(s, f"L{layer}.MLP") for s in (earlier if parallel else earlier + heads)]
        earlier = earlier + heads + [f"L{layer}.MLP"]
    return set(edges + [(s, "logits") for s in earlier])


@pytest.mark.parametrize(
    "n_layers, n_heads, n_kv, parallel",
    [(2, 4, 4, False), (3, 4, 2, False), (2, 6, 1, True), (4, 2, 2, True)],
)
def test_edges_match_an_independent_enumeration(n_layers, n_heads, n_kv, parallel):
    graph = Graph(n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv, parallel_attn_mlp=parallel)
    assert set(graph.edges()) == enumerate_edges(n_layers, n_heads, n_kv, parallel)
    assert graph.n_edges == len(graph.edges()) == int(graph.allowed.sum())
    assert len(graph.nodes) == 2 + n_layers * (n_heads + 1)


def test_smollm2_has_302_nodes_and_70651_edges():
    graph = Graph(n_layers=30, n_heads=9, n_kv_heads=3)  # SmolLM2-135M
    assert len(graph.nodes) == 302 and len(graph.inputs) == 30 * 16 + 1
    # 15 query/key/value inputs per layer read 1 + 10 l sources, the MLP 10 + 10 l, the logits 301
    assert graph.n_edges == sum(15 * (1 + 10 * l) + 10 + 10 * l for l in range(30)) + 301 == 70651


def test_gqa_names_and_counts():
    model = tiny("llama-gqa")  # 2 layers, 4 query heads, 2 key/value heads
    graph = Graph.from_model(model)
    assert graph.inputs[:9] == (
        "L0.H0.q",
        "L0.H1.q",
        "L0.H2.q",
        "L0.H3.q",
        "L0.KV0.k",
        "L0.KV1.k",
        "L0.KV0.v",
        "L0.KV1.v",
        "L0.MLP",
    )
    assert graph.heads_of("L1.KV1.v") == ["L1.H2", "L1.H3"]
    assert [s for s, t in graph.edges() if t == "L1.KV0.k"] == [
        "input",
        "L0.H0",
        "L0.H1",
        "L0.H2",
        "L0.H3",
        "L0.MLP",
    ]
    assert [s for s, t in graph.edges() if t == "L0.MLP"] == ["input", "L0.H0", "L0.H1", "L0.H2", "L0.H3"]
    # per layer: 8 attention inputs and the MLP; 11 sources in all
    assert graph.n_edges == 8 * 1 + 5 + 8 * 6 + 10 + 11 == 82
    assert str(graph) == "Graph(2 layers x 4 heads, 2 key/value heads: 12 nodes, 19 inputs, 82 edges)"


def test_parallel_blocks_have_no_edge_from_a_layer_to_its_own_mlp():
    graph = Graph.from_model(tiny("neox"))
    assert [s for s, t in graph.edges() if t == "L1.MLP"] == ["input", "L0.H0", "L0.H1", "L0.MLP"]
    with pytest.raises(ValueError, match="no edge 'L1.H0' -> 'L1.MLP'.*the input and the nodes up to L0.MLP"):
        graph.edge_index(("L1.H0", "L1.MLP"))


@pytest.mark.parametrize(
    "placement, why",
    [
        ("post", "post-norm blocks"),
        ("sandwich", "sandwich norms \\(Gemma 2/3\\)"),
        ("output", "output norms \\(OLMo 2\\)"),
    ],
)
def test_structures_without_per_head_terms_are_refused(placement, why):
    cfg = TransformerConfig(
        n_layers=2,
        d_model=8,
        n_heads=2,
        d_vocab=10,
        n_ctx=8,
        norm_placement=placement,
        causal=placement != "post",
    )
    with pytest.raises(
        GraphStructureError, match=f"norm_placement='{placement}': {why}.*Circuits need pre-norm"
    ):
        Graph.from_model(HookedTransformer(cfg))
    assert placement not in SUPPORTED_PLACEMENTS


def test_names_and_edges_the_graph_lacks():
    graph = Graph(n_layers=2, n_heads=2, n_kv_heads=2)
    with pytest.raises(UnknownNameError, match="no node input 'L0.H0.k': keys .* did you mean 'L0.KV0.k'"):
        graph.input_index("L0.H0.k")
    with pytest.raises(UnknownNameError, match="no node input 'L0.H0.qq'; did you mean 'L0.H0.q'"):
        graph.input_index("L0.H0.qq")
    with pytest.raises(UnknownNameError, match="no source node 'logits'"):
        graph.source_index("logits")
    with pytest.raises(ValueError, match="no edge 'L1.MLP' -> 'L1.H0.q'"):
        graph.edge_index(("L1.MLP", "L1.H0.q"))
    with pytest.raises(ValueError, match="a \\(source, input\\) pair"):
        graph.edge_index("input")
    with pytest.raises(ValueError, match="not a multiple"):
        Graph(n_layers=1, n_heads=3, n_kv_heads=2)


def test_json_round_trip(tmp_path):
    graph = Graph(n_layers=3, n_heads=4, n_kv_heads=2, parallel_attn_mlp=True)
    graph.save(tmp_path / "graph.json")
    data = json.loads((tmp_path / "graph.json").read_text())
    assert data["n_edges"] == graph.n_edges and len(data["edges"]) == graph.n_edges
    assert data["edges"][0] == ["input", "L0.H0.q"] and data["nodes"][-1] == "logits"
    assert Graph.load(tmp_path / "graph.json") == graph
    assert Graph.from_dict(graph.to_dict()) == graph
    with pytest.raises(ValueError, match="n_edges=5"):
        Graph.from_dict({**graph.to_dict(), "n_edges": 5})
    assert torch.equal(Graph.from_dict(data).allowed, graph.allowed)


@pytest.mark.parametrize("name", ["interp.circuits.graph", "interp.circuits.circuit"])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_graph_hands_out_nodes():
    g = Graph(n_layers=2, n_heads=4, n_kv_heads=2)
    assert all(isinstance(n, Node) for n in (*g.nodes, *g.inputs))
    assert [n.kind for n in g.inputs[:9]] == ["query"] * 4 + ["key"] * 2 + ["value"] * 2 + ["mlp"]
    assert g.nodes[-1] == "logits" and g.nodes[-1].kind == "output"
    assert g.heads_of("L1.KV1.v") == ["L1.H2", "L1.H3"]
    assert [n.head for n in g.heads_of(Node.key(0, 0))] == [0, 1]
