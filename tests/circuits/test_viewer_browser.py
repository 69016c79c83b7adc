"""The attribution-graph viewer in headless Chromium: it renders with no console errors and no network, shows a
node's inputs and outputs on click, keeps pins and supernodes in the page's state, and escapes markup."""

from __future__ import annotations

import json

import pytest
import torch

from interp.circuits import attribute
from interp.circuits.features.viewer import MAX_LINKS
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders
from tests.report.conftest import PAYLOAD, _chromium, browser  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=4)
    graph = attribute(model, tc, torch.tensor([0, 3, 8, 5, 9, 14]), max_logits=2, progress=False)
    graph.metadata["prompt"] = PAYLOAD
    contexts = {(int(lay), int(f)): [PAYLOAD, "plain text"] for lay, _, f in graph.features.tolist()}
    out = tmp_path_factory.mktemp("graph")
    with pytest.raises(ValueError, match="--slug .* is not a usable name"):
        graph.save(out, model=model, transcoders=tc, contexts=contexts, slug=PAYLOAD)  # it names a file
    graph.save(out, model=model, transcoders=tc, contexts=contexts, slug="payload-test")
    return out


def test_viewer_renders_and_escapes(browser, folder):  # noqa: F811
    page = (folder / "index.html").read_text()
    assert "<script>alert(1)" not in page and 'onerror="window' not in page
    assert len(page) < 2_000_000
    browser.open_file(folder / "index.html")
    assert browser.console_errors() == []
    assert browser.network_requests() == []
    assert browser.js("return window.__pwned === undefined && document.querySelectorAll('img').length === 0;")
    assert browser.js("return document.getElementById('prompt').textContent;") == PAYLOAD
    doc = json.loads((folder / "payload-test.json").read_text())
    n_links = min(len(doc["links"]), MAX_LINKS)
    assert browser.js("return document.querySelectorAll('svg .node').length;") >= len(doc["nodes"]) - 0
    assert browser.js("return document.querySelectorAll('svg .link').length;") == n_links


def test_click_pin_group_and_state(browser, folder):  # noqa: F811
    doc = json.loads((folder / "payload-test.json").read_text())
    feature = next(n for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder")
    browser.open_file(folder / "index.html")
    browser.js("document.querySelector(`svg .node[data-id='${arguments[0]}']`).dispatchEvent(new Event('click'));",
               feature["uid"])  # fmt: skip
    details = browser.js("return document.getElementById('details').textContent;")
    assert "Strongest inputs" in details and "Strongest outputs" in details and "Decoder promotes" in details
    assert PAYLOAD in details  # a context, shown as text
    browser.js("document.getElementById('pin').click();")
    browser.js("document.getElementById('group-name').value = arguments[0];", PAYLOAD)
    browser.js("document.getElementById('group').click();")
    state = browser.js("return window.graphViewer.state();")
    assert state["pinned"] == [feature["uid"]]
    assert state["supernodes"] == [{"name": PAYLOAD, "members": [feature["uid"]], "proposed": False}]
    assert PAYLOAD in browser.js("return document.getElementById('supernodes').textContent;")
    # the state survives a reload, from the page's address
    browser.driver.refresh()
    assert browser.js("return window.graphViewer.state();")["pinned"] == [feature["uid"]]
    assert browser.console_errors() == []
