"""Feature labels in the graph viewer: a node's ``clerp`` (its explanation, written by ``add_labels``) is its
label in the graph, the panel and the lists, and labels added after the page was built reach the page, whose
embedded copy ``add_labels`` rewrites, leaving everything else in it as it was."""

from __future__ import annotations

import json

import pytest
import torch

from interp.circuits import attribute
from interp.circuits.features.labels import add_labels
from interp.circuits.features.neuronpedia import FEATURE
from interp.circuits.features.viewer import DATA_ID
from interp.report.embedded import embedded_json, replace_embedded_json
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders
from tests.report.conftest import PAYLOAD, _chromium, browser  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


@pytest.fixture
def folder(tmp_path):
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=4)
    graph = attribute(model, tc, torch.tensor([0, 3, 8, 5, 9, 14]), max_logits=2, progress=False)
    return graph.save(tmp_path / "graph", model=model, transcoders=tc, slug="labelled")


def _features(folder):
    doc = json.loads((folder / "labelled.json").read_text())
    return [n for n in doc["nodes"] if n["feature_type"] == FEATURE]


def _strip_labels(data):
    for node in data["nodes"]:
        node.pop("clerp")
    return data


def test_labels_added_after_the_page_was_built_show_in_it(browser, folder):  # noqa: F811
    first, *rest = _features(folder)
    second = next(n for n in rest if n["feature"] != first["feature"])  # another feature: left unlabelled
    html = (folder / "index.html").read_text()
    before = embedded_json(html, DATA_ID)
    # a page in the folder built from another graph is left alone
    other = json.loads(json.dumps(before))
    other["metadata"]["slug"] = "another"
    (folder / "another.html").write_text(replace_embedded_json(html, DATA_ID, other))
    untouched = (folder / "another.html").read_text()

    results = add_labels(folder, {first["feature"]: PAYLOAD}, "scan")
    (result,) = [r for r in results if r.path.name == "labelled.json"]
    assert result.pages == (folder / "index.html",) and result.labelled >= 1
    assert (folder / "another.html").read_text() == untouched
    after = embedded_json((folder / "index.html").read_text(), DATA_ID)
    assert _strip_labels(json.loads(json.dumps(after))) == _strip_labels(json.loads(json.dumps(before)))
    labelled = [n["uid"] for n in after["nodes"] if n.get("clerp") == PAYLOAD]
    assert labelled == [n["uid"] for n in _features(folder) if n["feature"] == first["feature"]]
    # nothing new: the page is not rewritten again
    assert add_labels(folder, {first["feature"]: PAYLOAD}, "scan")[0].pages == ()

    browser.open_file(folder / "index.html")
    title = browser.js(
        "return document.querySelector(`svg .node[data-id='${arguments[0]}'] title`).textContent;",
        first["uid"],
    )
    position = first["ctx_idx"]
    assert title == f"{PAYLOAD} @{position} (L{first['layer']} F{first['node_id'].split('_')[1]} @{position})"
    plain = browser.js(
        "return document.querySelector(`svg .node[data-id='${arguments[0]}'] title`).textContent;",
        second["uid"],
    )
    assert plain == f"L{second['layer']} F{second['node_id'].split('_')[1]} @{second['ctx_idx']}"  # no label
    browser.js("window.graphViewer.select(arguments[0]);", first["uid"])
    assert browser.js("return document.querySelector('#details h2').textContent;") == f"{PAYLOAD} @{position}"
    browser.js("window.graphViewer.togglePin(arguments[0]);", first["uid"])
    assert browser.js("return document.getElementById('pin-list').textContent;") == f"{PAYLOAD} @{position}"
    assert browser.js("return window.__pwned === undefined && document.querySelectorAll('img').length === 0;")
    assert browser.console_errors() == [] and browser.network_requests() == []
