"""The viewer's explained attention and saved subgraph in headless Chromium: the page opens with the file's
pins and supernodes; clicking an explained edge lists its heads, clicking a head shows its query-node x
key-node terms, and a node in that table selects the node in the graph; the subgraph downloads as a file
``--subgraph`` reads back."""

from __future__ import annotations

import json

import pytest
import torch

from interp.circuits import attribute
from interp.circuits.features.attention import attention_edges, explain_edges
from interp.circuits.features.subgraph import read_subgraph
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders
from tests.report.conftest import PAYLOAD, _chromium, browser  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=4)
    graph = attribute(model, tc, torch.tensor([0, 3, 8, 5, 9, 14]), max_logits=2, progress=False)
    edges = attention_edges(graph, 2)
    keys = {graph.nodes[graph.index(s)].position for _, s in edges}
    other = min(set(range(graph.n_pos - 1)) - keys)  # a key no edge reads, for the difference
    explained = explain_edges(model, tc, graph, edges, top_heads=2, other_key=other)
    out = tmp_path_factory.mktemp("graph")
    first = graph.save(out / "first", model=model)
    shown = [n["uid"] for n in json.loads((first / "graph.json").read_text())["nodes"]]
    features = [u for u in shown if u.startswith("L")]
    graph = graph.subgraph(pinned=[shown[-1]], supernodes={PAYLOAD: features[:2]})
    folder = graph.save(out / "explained", model=model, attention=explained)
    return folder, graph, explained


def test_the_saved_subgraph_opens_in_the_page(browser, saved):  # noqa: F811
    folder, graph, _ = saved
    browser.open_file(folder / "index.html")
    state = browser.js("return window.graphViewer.state();")
    assert state["pinned"] == list(graph.selection.pinned)
    ((name, members),) = graph.selection.supernodes
    assert state["supernodes"] == [{"name": name, "members": list(members), "proposed": False}]
    assert PAYLOAD in browser.js("return document.getElementById('supernodes').textContent;")
    # the page's subgraph, downloaded, is a file --subgraph reads back to the same subgraph
    path = folder / "downloaded.json"
    path.write_text(browser.js("return window.graphViewer.subgraphJson();"))
    assert read_subgraph(path, graph) == graph.selection
    assert browser.console_errors() == [] and browser.network_requests() == []


def test_click_an_edge_then_a_head_then_a_node(browser, saved):  # noqa: F811
    folder, graph, explained = saved
    browser.open_file(folder / "index.html")
    listed = browser.js("return [...document.querySelectorAll('#attention .edge-link')].length;")
    assert listed == len(explained)
    first = explained[0]
    browser.js(
        "document.querySelector(`svg .link[data-source='${arguments[0]}'][data-target='${arguments[1]}']`)"
        ".dispatchEvent(new Event('click'));",
        first.source,
        first.target,
    )
    heads = browser.js(
        "return [...document.querySelectorAll('#attention-heads .head-row')].map(r => r.dataset.head);"
    )
    assert heads == [f"L{h.layer}H{h.head}" for h in first.heads]
    browser.js("document.querySelector('#attention-heads .head-row td').click();")
    rows = browser.js(
        "return [...document.querySelectorAll('#attention-terms tr')].slice(1)"
        ".map(r => [...r.children].map(c => c.textContent));"
    )
    head = first.heads[0]
    expected = head.top(len(rows))
    assert [(q, k) for q, k, _ in rows] == [(q, k) for q, k, _ in expected]
    assert [float(v) for _, _, v in rows] == pytest.approx(
        [v for _, _, v in expected], rel=5e-3
    )  # 3 digits shown
    assert browser.js("return document.querySelectorAll('#attention-difference tr').length;") > 1
    # a node of the table that the graph draws selects it there
    link = browser.js(
        "const c = document.querySelector('#attention-terms td[data-node]'); return c && c.dataset.node;"
    )
    assert link is not None
    browser.js("document.querySelector('#attention-terms td[data-node]').click();")
    assert browser.js("return document.querySelector('svg .node.selected').dataset.id;") == link
    # an edge nobody explained says so
    other = json.loads((folder / "graph.json").read_text())["links"]
    explained_pairs = {(e.source, e.target) for e in explained}
    page_links = browser.js(
        "return [...document.querySelectorAll('svg .link')].map(l => [l.dataset.source, l.dataset.target]);"
    )
    plain = next(p for p in page_links if tuple(p) not in explained_pairs)
    browser.js("window.attentionViewer.showEdge(arguments[1], arguments[0]);", *plain)
    assert (
        browser.js("return document.getElementById('attention-none').textContent;")
        == "this edge was not explained"
    )
    assert other and browser.console_errors() == []
