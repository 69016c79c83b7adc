"""Circuits as edge sets: construction, checks, JSON, and pruning and selection from scores."""

import pytest
import torch

from interp.circuits import Circuit, EdgeScores, Graph, greedy, prune, top_n

GRAPH = Graph(n_layers=2, n_heads=2, n_kv_heads=1)


def scores_of(values: dict) -> EdgeScores:
    s = torch.zeros(GRAPH.allowed.shape)
    for edge, v in values.items():
        s[GRAPH.edge_index(edge)] = v
    return EdgeScores(graph=GRAPH, scores=s, method="eap", n_pairs=1)


def test_edges_nodes_heads_and_json(tmp_path):
    c = Circuit.from_edges(GRAPH, [("L0.H1", "L1.KV0.v"), ("input", "L0.H1.q"), ("L1.H0", "logits")])
    assert c.edges == [("input", "L0.H1.q"), ("L0.H1", "L1.KV0.v"), ("L1.H0", "logits")]  # forward order
    assert c.nodes == ["input", "L0.H1", "L1.H0", "L1.H1", "logits"]  # a key/value input serves its group
    assert c.heads == [(0, 1), (1, 0), (1, 1)]
    assert ("input", "L0.H1.q") in c and ("input", "L0.H0.q") not in c
    s = scores_of({("input", "L0.H1.q"): 0.5})
    data = c.to_dict(s.scores)
    assert data["edges"][0] == ["input", "L0.H1.q", 0.5] and data["n_edges"] == 3
    c.save(tmp_path / "c.json")
    assert Circuit.load(tmp_path / "c.json") == c == Circuit.from_dict(data, GRAPH)
    with pytest.raises(ValueError, match="saved for Graph\\(2 layers"):
        Circuit.from_dict(data, Graph(n_layers=3, n_heads=2, n_kv_heads=1))


def test_a_circuit_naming_an_edge_the_graph_lacks_is_refused():
    with pytest.raises(ValueError, match="no edge 'L1.H0' -> 'L0.MLP'"):
        Circuit.from_edges(GRAPH, [("L1.H0", "L0.MLP")])
    with pytest.raises(KeyError, match="no node input 'L0.H0.v': keys and values .*did you mean 'L0.KV0.v'"):
        Circuit.from_edges(GRAPH, [("input", "L0.H0.v")])
    with pytest.raises(ValueError, match="no edge 'L0.H0' -> 'L0.H0.q': L0.H0.q reads only the input"):
        Circuit(GRAPH, ~GRAPH.allowed)
    with pytest.raises(ValueError, match="\\[7, 11\\]"):
        Circuit(GRAPH, torch.ones(2, 2, dtype=torch.bool))


def test_prune_keeps_only_paths_from_input_to_logits():
    kept = [("input", "L0.H0.q"), ("L0.H0", "L1.MLP"), ("L1.MLP", "logits")]
    dangling_end = [("input", "L0.H1.q")]  # L0.H1 reaches nothing
    dangling_start = [("L0.MLP", "logits")]  # nothing reaches L0.MLP
    via_kv = [("input", "L1.KV0.k"), ("L1.H1", "logits")]  # keys shared by H0 and H1 make H1 reached
    c = Circuit.from_edges(GRAPH, kept + dangling_end + dangling_start + via_kv)
    assert set(prune(c).edges) == set(kept + via_kv)
    assert prune(prune(c)) == prune(c)


def test_top_n_and_greedy():
    values = {("input", "L0.H0.q"): 0.5, ("L0.H0", "logits"): -0.9, ("L0.MLP", "logits"): 2.0,
              ("input", "L1.MLP"): 0.1, ("L1.MLP", "logits"): 0.2, ("input", "L0.H1.q"): 0.3}  # fmt: skip
    s = scores_of(values)
    assert top_n(s, 3, prune_paths=False).edges == [
        ("input", "L0.H0.q"),
        ("L0.H0", "logits"),
        ("L0.MLP", "logits"),
    ]
    # pruned: L0.MLP has no input edge, so its edge to the logits is on no path
    assert top_n(s, 3).edges == [("input", "L0.H0.q"), ("L0.H0", "logits")]
    assert top_n(s, 3, absolute=False, prune_paths=False).edges == [
        ("input", "L0.H0.q"),
        ("input", "L0.H1.q"),
        ("L0.MLP", "logits"),
    ]
    # greedy grows from the logits: L0.MLP -> logits, L0.H0 -> logits, then the best edge into L0.MLP or L0.H0
    g = greedy(s, 3, prune_paths=False)
    assert set(g.edges) == {("L0.MLP", "logits"), ("L0.H0", "logits"), ("input", "L0.H0.q")}
    assert top_n(s, 0).n_edges == 0 and top_n(s, 10**6, prune_paths=False).n_edges == GRAPH.n_edges
    with pytest.raises(ValueError, match="n=-1"):
        top_n(s, -1)
    frame = s.frame(top=2)
    assert list(frame["source"]) == ["L0.MLP", "L0.H0"] and list(frame["score"]) == pytest.approx([2.0, -0.9])
