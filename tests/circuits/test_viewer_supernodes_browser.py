"""Supernodes in the graph viewer, in headless Chromium: proposed groups open marked as proposed; a reader
accepts, rejects, renames, splits (into a new group or back to single nodes) and merges them, each through the
page's buttons; the page saves its subgraph into the graph file, which is the same file with only the subgraph
changed, validates with circuit-tracer's own schema, reads back in Python to the subgraph made in the page, and
reopens in the page to the same state. Served over http, the page reads the graph file beside it by itself."""

from __future__ import annotations

import functools
import json
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from selenium.webdriver.common.by import By

from interp.circuits import attribute
from interp.circuits.features.subgraph import make_subgraph, read_subgraph
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders
from tests.reference_envs import require
from tests.report.conftest import PAYLOAD, _chromium, browser  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser
VALIDATE = (
    "import json, sys; from circuit_tracer.frontend.graph_models import Model; "
    "Model.model_validate(json.load(open(sys.argv[1]))); print('valid')"
)
PROPOSED = ("A", "B", "C")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A graph saved with three proposed supernodes (A: 3 nodes, B: 2, C: 1) and one of the reader's own."""
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=4)
    graph = attribute(model, tc, torch.tensor([0, 3, 8, 5, 9, 14]), max_logits=2, progress=False)
    out = tmp_path_factory.mktemp("graph")
    kept = {"node_threshold": 0.95, "edge_threshold": 0.99}  # enough feature nodes to group
    first = graph.save(out / "plain", model=model, **kept)
    shown = json.loads((first / "graph.json").read_text())["nodes"]
    f = [n["uid"] for n in shown if n["feature_type"] == "cross layer transcoder"]
    assert len(f) >= 8
    groups = {"A": f[0:3], "B": f[3:5], "C": f[5:6], "mine": f[6:7]}
    graph = graph.subgraph(pinned=["token@1"], supernodes=groups)
    report = {"rule": "planted for the test", "proposed": list(PROPOSED)}
    folder = graph.save(out / "proposed", model=model, supernode_report=report, **kept)
    return folder, graph, f


def _open(browser, folder):  # noqa: F811
    browser.open_file(folder / "index.html")
    browser.js("localStorage.clear(); history.replaceState(null, '', location.pathname);")
    browser.open_file(folder / "index.html")


def _state(browser):  # noqa: F811
    return browser.js("return window.graphViewer.state();")


def _groups(browser):  # noqa: F811
    return [(s["name"], s["members"], s["proposed"]) for s in _state(browser)["supernodes"]]


def _click(browser, name, action):  # noqa: F811
    browser.js(
        "[...document.querySelectorAll('#supernodes .supernode')].find(d => d.dataset.name === arguments[0])"
        ".querySelector(arguments[1]).click();",
        name,
        action,
    )


def _type(browser, name, text):  # noqa: F811
    browser.js(
        "[...document.querySelectorAll('#supernodes .supernode')].find(d => d.dataset.name === arguments[0])"
        ".querySelector('.sn-new-name').value = arguments[1];",
        name,
        text,
    )


def _tick(browser, name, member):  # noqa: F811
    browser.js(
        "[...document.querySelectorAll('#supernodes .supernode')].find(d => d.dataset.name === arguments[0])"
        ".querySelector(`.sn-member[value='${arguments[1]}']`).checked = true;",
        name,
        member,
    )


def _choose(browser, path):  # noqa: F811
    """Choose ``path`` in the page's graph-file input and wait until the page has read it."""
    before = browser.js("return document.getElementById('graph-file-status').textContent;")
    browser.driver.find_element(By.ID, "graph-file").send_keys(str(path))
    _wait(
        browser, "return document.getElementById('graph-file-status').textContent !== arguments[0];", before
    )


def _wait(browser, script, *args):  # noqa: F811
    for _ in range(100):
        if browser.js(script, *args):
            return
        browser.driver.execute_async_script("setTimeout(arguments[arguments.length - 1], 50);")
    raise AssertionError(f"the page never met: {script}")


def _pinned(browser):  # noqa: F811
    return browser.js("return window.graphViewer.allPinned();")


def test_accept_reject_rename_split_merge_then_save_and_reopen(browser, saved, tmp_path):  # noqa: F811
    folder, graph, f = saved
    _open(browser, folder)
    assert _groups(browser) == [
        ("A", f[0:3], True),
        ("B", f[3:5], True),
        ("C", f[5:6], True),
        ("mine", f[6:7], False),
    ]
    assert browser.js("return document.querySelectorAll('#supernodes .sn-status').length;") == 3
    browser.js("window.graphViewer.select(arguments[0]);", f[0])  # a member stays pinned while it is one
    assert browser.js("const b = document.getElementById('pin'); return [b.disabled, b.textContent];") == [
        True,
        "pinned in supernode A",
    ]

    _click(browser, "A", ".sn-accept")
    assert _groups(browser)[0] == ("A", f[0:3], False)
    _click(browser, "B", ".sn-reject")  # a rejected proposal is gone, its members unpinned
    assert [g[0] for g in _groups(browser)] == ["A", "C", "mine"]
    assert not set(f[3:5]) & set(_pinned(browser))
    _type(browser, "C", "mine")  # a name already taken is refused, in one line
    _click(browser, "C", ".sn-rename")
    assert "already named mine" in browser.js(
        "return document.getElementById('supernode-message').textContent;"
    )
    _type(browser, "C", PAYLOAD)
    _click(browser, "C", ".sn-rename")
    assert _groups(browser)[1] == (PAYLOAD, f[5:6], True)  # renamed, still awaiting a decision
    _tick(browser, "A", f[2])
    _type(browser, "A", "A2")
    _click(browser, "A", ".sn-split")  # a ticked member into a new group
    _tick(browser, "A", f[1])
    _click(browser, "A", ".sn-single")  # a ticked member back to a single node, still pinned
    assert _groups(browser) == [
        ("A", f[0:1], False),
        ("A2", f[2:3], False),
        (PAYLOAD, f[5:6], True),
        ("mine", f[6:7], False),
    ]
    assert f[1] in _pinned(browser)
    browser.js(
        "const d = [...document.querySelectorAll('#supernodes .supernode')].find(d => d.dataset.name === 'mine');"
        "d.querySelector('.sn-merge-with').value = 'A2'; d.querySelector('.sn-merge').click();"
    )
    edited = [("A", f[0:1], False), (PAYLOAD, f[5:6], True), ("mine", [f[6], f[2]], False)]
    assert _groups(browser) == edited
    assert PAYLOAD in browser.js("return document.getElementById('supernodes').textContent;")
    assert browser.js("return window.__pwned === undefined && document.querySelectorAll('img').length === 0;")
    state = _state(browser)

    browser.js("window.graphFile.download = (text, name) => { window.__saved = [text, name]; };")
    # opened from a file, saving asks for the graph file itself (the page holds a bounded, rounded copy), and
    # choosing it keeps the page's edits
    browser.js("document.getElementById('save-graph').click();")
    assert browser.js("return document.getElementById('graph-file-status').textContent;").startswith(
        "choose graph.json to write this page's subgraph into"
    )
    assert browser.js("return window.__saved === undefined;")
    browser.driver.find_element(By.ID, "graph-file-into").send_keys(str(folder / "graph.json"))
    _wait(browser, "return window.__saved !== undefined;")
    assert _groups(browser) == edited and browser.js("return window.graphFile.loaded();")
    text, name = browser.js("return window.__saved;")
    # once the page has the file, the button saves at once
    browser.js("window.__saved = undefined; document.getElementById('save-graph').click();")
    assert browser.js("return window.__saved;") == [text, name]
    assert name == "graph.json"
    path = tmp_path / "graph.json"
    path.write_text(text)
    original, written = json.loads((folder / "graph.json").read_text()), json.loads(text)
    # the same file but for the subgraph and the proposals still awaiting a decision
    for doc in (original, written):
        doc["qParams"].pop("pinnedIds"), doc["qParams"].pop("supernodes")
        doc["interp"].pop("subgraph"), doc["interp"]["supernode_criterion"].pop("proposed")
    assert written == original
    # built in Python from the same edits: B's members unpinned, every pin in its place
    pins = ["token@1", f[0], f[1], f[2], f[5], f[6]]
    expected = make_subgraph(graph, pins, {"A": f[0:1], PAYLOAD: f[5:6], "mine": [f[6], f[2]]})
    assert read_subgraph(path, graph) == expected
    saved_doc = json.loads(text)
    assert saved_doc["interp"]["supernode_criterion"]["proposed"] == [PAYLOAD]
    ids = {n["uid"]: n["node_id"] for n in saved_doc["nodes"]}
    assert saved_doc["qParams"]["supernodes"] == [[n, *(ids[m] for m in ms)] for n, ms in expected.supernodes]
    assert saved_doc["qParams"]["pinnedIds"] == [ids[m] for m in expected.pinned]
    # reopened in a fresh page, the saved file gives the same state
    _open(browser, folder)
    assert _groups(browser)[0] == ("A", f[0:3], True)  # the page's own file, as it was
    _choose(browser, path)
    assert _groups(browser) == edited
    assert set(_state(browser)["pinned"]) == set(state["pinned"]) | {m for _, ms, _ in edited for m in ms}
    assert browser.console_errors() == [] and browser.network_requests() == []

    python = require("circuit-tracer")
    result = subprocess.run(
        [str(python), "-c", VALIDATE, str(path)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip() == "valid", result.stderr[-3000:]


def test_a_file_of_another_graph_is_refused(browser, saved, tmp_path):  # noqa: F811
    folder, _, _ = saved
    other = json.loads((folder / "graph.json").read_text())
    other["metadata"]["slug"] = "another"
    (tmp_path / "another.json").write_text(json.dumps(other))
    _open(browser, folder)
    before = _state(browser)
    _choose(browser, tmp_path / "another.json")
    status = browser.js("return document.getElementById('graph-file-status').textContent;")
    assert status == 'another.json: this file holds graph "another"; the page shows "graph"'
    assert _state(browser) == before and not browser.js("return window.graphFile.loaded();")


def test_served_the_page_reads_its_graph_file(browser, saved, tmp_path):  # noqa: F811
    folder, _, f = saved
    served = tmp_path / "served"
    served.mkdir()
    doc = json.loads((folder / "graph.json").read_text())
    for node in doc["nodes"]:
        if node["uid"] == f[0]:
            node["clerp"] = "labelled in the file only"
    (served / "graph.json").write_text(json.dumps(doc))
    (served / "index.html").write_text((folder / "index.html").read_text())
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        browser.driver.get(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        _wait(browser, "return Boolean(window.graphFile && window.graphFile.loaded());")
        title = browser.js(
            "return document.querySelector(`svg .node[data-id='${arguments[0]}'] title`).textContent;", f[0]
        )
        assert title.startswith("labelled in the file only @")
        assert [e for e in browser.console_errors() if "favicon.ico" not in e] == []
    finally:
        server.shutdown()
        thread.join()


def test_a_file_with_only_qparams_opens_by_its_node_ids(browser, saved, tmp_path):  # noqa: F811
    """A graph file as Neuronpedia or circuit-tracer write it (no interp extension) gives its subgraph in
    qParams, by Neuronpedia ids."""
    folder, graph, f = saved
    doc = json.loads((folder / "graph.json").read_text())
    ids = {n["uid"]: n["node_id"] for n in doc["nodes"]}
    del doc["interp"]
    doc["qParams"]["pinnedIds"] = [ids[f[7]]]
    doc["qParams"]["supernodes"] = [["theirs", ids[f[0]], ids[f[4]]]]
    (tmp_path / "graph.json").write_text(json.dumps(doc))
    _open(browser, folder)
    _choose(browser, tmp_path / "graph.json")
    assert _groups(browser) == [("theirs", [f[0], f[4]], False)]
    assert _state(browser)["pinned"] == [f[7], f[0], f[4]]
    assert browser.console_errors() == []
