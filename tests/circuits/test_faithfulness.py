"""Faithfulness, its curve and MIB's area metrics; the drawing."""

import warnings

import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from interp.circuits import (
    Circuit,
    Graph,
    area_metrics,
    draw_circuit,
    eap_ig,
    evaluate,
    faithfulness,
    faithfulness_curve,
    logit_difference,
    top_n,
)
from interp.circuits.faithfulness import curve_sizes
from tests.circuits.models import tiny, tiny_pairs


def test_faithfulness_is_normalised_to_the_full_and_corrupted_runs():
    assert faithfulness(2.0, full=3.0, corrupt=1.0) == 0.5
    assert faithfulness(-1.0, full=-2.0, corrupt=0.0) == 0.5
    with pytest.warns(UserWarning, match="undefined"):
        assert faithfulness(1.0, full=1.0, corrupt=1.0) != faithfulness(1.0, full=1.0, corrupt=1.0)  # NaN


def test_area_metrics_by_trapezoids():
    assert area_metrics([0.0, 1.0], [1.0, 1.0]) == {"cpr": 1.0, "cmd": 0.0}
    got = area_metrics([0.5, 0.0, 1.0], [0.5, 0.0, 1.0])  # unsorted input; a straight line
    assert got["cpr"] == pytest.approx(0.5) and got["cmd"] == pytest.approx(0.5)
    got = area_metrics([0.0, 0.5, 1.0], [1.5, 1.5, 1.0])  # overshooting counts against CMD too
    assert got["cpr"] == pytest.approx(1.375) and got["cmd"] == pytest.approx(0.375)
    with pytest.raises(ValueError, match="equal-length"):
        area_metrics([0.1, 0.2], [1.0])
    assert curve_sizes(1000) == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]


def test_evaluate_and_curve_on_a_tiny_model():
    model = tiny("llama-gqa")
    pairs = tiny_pairs(model, n=4, positions=True)
    graph = Graph.from_model(model)
    full, empty = Circuit.full(graph), Circuit.empty(graph)
    result = evaluate(model, [full, empty], pairs, logit_difference, batch_size=3)
    assert result.faithfulness == pytest.approx((1.0, 0.0), abs=1e-6)
    direct = logit_difference(model(pairs.clean), pairs).mean().detach()
    assert result.full == pytest.approx(float(direct), abs=1e-5)
    scores = eap_ig(model, pairs, logit_difference, steps=2)
    frame = faithfulness_curve(model, scores, pairs, logit_difference, sizes=[5, 20, graph.n_edges])
    assert list(frame.columns) == ["requested", "edges", "fraction", "metric", "faithfulness"]
    assert frame["edges"].iloc[-1] == graph.n_edges and frame["faithfulness"].iloc[-1] == pytest.approx(1.0)
    assert (frame["edges"] <= frame["requested"]).all()
    one = evaluate(model, top_n(scores, 20), pairs, logit_difference)
    assert frame["faithfulness"].iloc[1] == pytest.approx(one.faithfulness[0])
    assert set(frame.attrs) == {"full", "corrupt", "cpr", "cmd"}
    with pytest.raises(ValueError, match="selection='best'"):
        faithfulness_curve(model, scores, pairs, logit_difference, selection="best")


def test_drawing():
    graph = Graph(n_layers=3, n_heads=4, n_kv_heads=2)
    edges = [
        ("input", "L0.H1.q"),
        ("L0.H1", "L2.KV1.k"),
        ("L0.H1", "L0.MLP"),
        ("L2.H3", "logits"),
        ("L0.MLP", "logits"),
    ]
    circuit = Circuit.from_edges(graph, edges)
    scores = torch.zeros(graph.allowed.shape)
    for k, e in enumerate(edges):
        scores[graph.edge_index(e)] = (-1) ** k * (k + 1)
    from interp.circuits import EdgeScores

    fig = draw_circuit(circuit, EdgeScores(graph=graph, scores=scores, method="eap", n_pairs=1))
    assert isinstance(fig, Figure)
    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(edges)
    widths = sorted(a.get_linewidth() for a in arrows)
    assert widths[0] < widths[-1]
    assert sum(a.get_linestyle() == "--" for a in arrows) == 2  # the negative edges are dashed
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["input", "L0", "L2", "logits"]  # only the layers the circuit touches
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.savefig(__import__("io").BytesIO(), format="png")
