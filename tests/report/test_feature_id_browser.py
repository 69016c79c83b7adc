"""The pages' featureIndex (feature_id.js, run in Chromium) is the number the graph files carry: circuit-tracer's
Cantor pairing of (layer, feature) as interp's Neuronpedia writer computes it, on a table of values."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from interp.analysis.node import Node
from interp.circuits.features.neuronpedia import node_record
from interp.report.assets import read_asset
from tests.report.conftest import _chromium, browser  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

SAFE = 2**53 - 1  # the largest integer a JavaScript number holds exactly
TABLE = [
    (0, 0),
    (0, 1),
    (1, 0),
    (1, 1),
    (3, 17),
    (17, 3),
    (25, 16_383),
    (79, 131_071),
    (61, 2**20 - 1),
    (0, 2**24),
    (5, 10**7),
    (
        0,
        134_217_726,
    ),  # the last feature of layer 0 whose index a JavaScript number holds (f (f + 1) does not)
]
_RNG = random.Random(0)
TABLE += [(_RNG.randrange(128), _RNG.randrange(2**22)) for _ in range(40)]


def _python_index(layer: int, feature: int) -> int:
    """The ``feature`` field of the feature node's record in ``graph.json``."""
    graph = SimpleNamespace(activations=[0.0])
    return node_record(graph, 0, Node.feature_node(layer, 0, feature), 0.0, vocab=1)["feature"]


def _load(browser):  # noqa: F811
    browser.js(read_asset("feature_id.js"))


def test_js_feature_index_equals_the_graph_files(browser):  # noqa: F811
    _load(browser)
    expected = [_python_index(layer, feature) for layer, feature in TABLE]
    assert max(expected) <= SAFE and expected[:6] == [0, 2, 1, 4, 227, 213]
    found = browser.js(
        "return arguments[0].map(([l, f]) => window.interpFeatureId.index(l, f));", [list(p) for p in TABLE]
    )
    assert found == expected


@pytest.mark.parametrize(
    ("layer", "feature", "message"),
    [
        (0, 134_217_727, "featureIndex of layer 0, feature 134217727 is past 2^53"),
        (-1, 3, "layer -1 is not a non-negative integer"),
        (2, 1.5, "feature 1.5 is not a non-negative integer"),
        ("2", 3, 'layer "2" is not a non-negative integer'),
    ],
)
def test_js_feature_index_refuses_what_it_cannot_number_exactly(browser, layer, feature, message):  # noqa: F811
    _load(browser)
    if isinstance(layer, int) and isinstance(feature, int) and layer >= 0:
        assert _python_index(layer, feature) > SAFE  # Python's exact integer is past what JS holds
    error = browser.js(
        "try { window.interpFeatureId.index(arguments[0], arguments[1]); return null; }"
        " catch (e) { return [e.name, e.message]; }",
        layer,
        feature,
    )
    assert error == ["RangeError", message]
