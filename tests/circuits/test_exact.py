"""Exact edge patching: one edge patched equals the by-hand computation and the circuit of all other edges."""

import pytest
import torch

from interp.circuits import Circuit, Graph, evaluate, exact_edge_scores, logit_difference
from tests.circuits.models import by_hand_circuit, tiny, tiny_pairs

EDGES = [("input", "L0.H1.q"), ("L0.H0", "L1.KV1.k"), ("L0.H1", "L0.MLP"), ("L0.MLP", "L1.H0.q"),
         ("L1.H1", "logits"), ("input", "logits"), ("L0.MLP", "L1.KV0.v")]  # fmt: skip


def by_hand_metric(model, pairs, keep):
    values = []
    for row in range(len(pairs)):
        logits = by_hand_circuit(model, pairs.clean[row], pairs.corrupt[row], keep)
        a, f = int(pairs.labels["answer"][row]), int(pairs.labels["foil"][row])
        values.append(logits[-1, a] - logits[-1, f])
    return torch.stack(values).mean()


def test_one_edge_patched_equals_the_by_hand_computation():
    model = tiny("gpt2")
    pairs = tiny_pairs(model, n=3)
    graph = Graph.from_model(model)
    scores = exact_edge_scores(model, pairs, logit_difference, EDGES, edges_per_pass=3)
    everything = set(graph.edges())
    clean = by_hand_metric(model, pairs, everything)
    for edge in EDGES:
        want = clean - by_hand_metric(model, pairs, everything - {edge})
        torch.testing.assert_close(torch.tensor(scores[edge]), want, atol=2e-5, rtol=1e-4)
    assert max(abs(scores[e]) for e in EDGES) > 1e-2  # the edges matter
    others = scores.scores.clone()
    for e in EDGES:
        others[graph.edge_index(e)] = 0
    assert not others.any()


@pytest.mark.parametrize("name", ["llama-gqa", "neox"])
def test_exact_scores_equal_running_every_other_edge(name):
    model = tiny(name)
    pairs = tiny_pairs(model, n=4, positions=True)
    graph = Graph.from_model(model)
    edges = [e for e in graph.edges()[::9]]
    scores = exact_edge_scores(model, pairs, logit_difference, edges, batch_size=3)
    circuits = [Circuit(graph, graph.allowed & ~Circuit.from_edges(graph, [e]).mask) for e in edges]
    result = evaluate(model, circuits, pairs, logit_difference, batch_size=3)
    want = torch.tensor([result.full - v for v in result.values], dtype=torch.float64)
    torch.testing.assert_close(scores.values(edges).double(), want, atol=2e-5, rtol=1e-4)


def test_bad_edges_are_refused_before_any_work():
    model = tiny("gpt2")
    pairs = tiny_pairs(model)
    with pytest.raises(ValueError, match="no edge 'L1.H0' -> 'L0.MLP'"):
        exact_edge_scores(model, pairs, logit_difference, [("L1.H0", "L0.MLP")])
    with pytest.raises(KeyError, match="did you mean 'L1.KV0.k'"):
        exact_edge_scores(model, pairs, logit_difference, [("L0.H0", "L1.H0.k")])
    with pytest.raises(ValueError, match="more than once"):
        exact_edge_scores(model, pairs, logit_difference, [("input", "logits")] * 2)
