"""The dashboard page and the graph viewer's dashboards in headless Chromium: offline from a file (embedded
summaries, no request leaves the page, markup in tokens stays text) and served over http on loopback (a
clicked feature's full file is read)."""

from __future__ import annotations

import functools
import http.server
import json
import threading

import pytest

from interp.circuits import attribute
from interp.sae.dashboards import Settings, write_dashboards
from interp.sae.dashboards.page import COMPACT_GROUP, COMPACT_TOP, render_page
from tests.report.conftest import PAYLOAD, _chromium, browser  # noqa: F401  (fixtures)
from tests.sae.dashboards import helpers

pytestmark = pytest.mark.browser
SETTINGS = Settings(sample=20, top=8, quantiles=4, per_quantile=4)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A graph folder with dashboards; the densest feature's file carries markup in every string it shows."""
    model = helpers.model()
    tc = helpers.dictionary("clt", model)
    out = tmp_path_factory.mktemp("dash")
    write_dashboards(model, tc, out, helpers.texts(60), scan="tc", settings=SETTINGS)
    root = out / "features" / "tc"
    index = json.loads((root / "index.json").read_text())
    densest = max(index["features"], key=lambda r: r["density"])
    path = root / f"{densest['featureIndex']}.json"
    record = json.loads(path.read_text())
    record["top_logits"][0] = PAYLOAD
    record["examples_quantiles"][1]["quantile_name"] = PAYLOAD
    record["examples_quantiles"][0]["examples"][0]["tokens"][0] = PAYLOAD
    path.write_text(json.dumps(record))
    (root / "index.html").write_text(render_page(root, index))
    graph = attribute(model, tc, "w17 w33 w5 w48", max_logits=3, progress=False)
    graph.save(out, model=model, transcoders=tc, dashboards=out, node_threshold=0.99, edge_threshold=0.99)
    return out, densest, record


@pytest.fixture
def served(folder):
    """The graph folder served over http on loopback (as ``python -m http.server`` would)."""
    out, _, _ = folder
    handler = functools.partial(QuietHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _groups(browser):  # noqa: F811
    return browser.js(
        "return Array.from(document.querySelectorAll('#dashboard .dash-group')).map(g => "
        "[g.querySelector('.dash-group-title').textContent, g.querySelectorAll('.dash-example').length]);"
    )


def test_page_offline_lists_features_and_shows_an_embedded_dashboard(browser, folder):  # noqa: F811
    out, densest, record = folder
    page = out / "features" / "tc" / "index.html"
    html = page.read_text()
    assert "<script>alert(1)" not in html and 'onerror="window' not in html and len(html) < 5_000_000
    browser.open_file(page)
    assert browser.console_errors() == [] and browser.network_requests() == []
    index = json.loads((out / "features" / "tc" / "index.json").read_text())
    assert browser.js("return document.querySelectorAll('#features tbody tr').length;") == min(
        200, len(index["features"])
    )
    first = browser.js("return document.querySelector('#features tbody tr').dataset.index;")
    assert int(first) == densest["featureIndex"]  # sorted by density
    browser.js("document.querySelector('#features tbody tr').click();")
    text = browser.js("return document.getElementById('dashboard').textContent;")
    assert PAYLOAD in text and "Embedded summary" in text
    assert browser.js(
        "return window.__pwned === undefined && document.querySelectorAll('#dashboard img').length === 0;"
    )
    groups = _groups(browser)
    assert groups[0] == [
        "Top activations",
        min(COMPACT_TOP, len(record["examples_quantiles"][0]["examples"])),
    ]
    assert all(n <= COMPACT_GROUP for _, n in groups[1:]) and groups[1][0] == PAYLOAD
    bars = browser.js("return document.querySelectorAll('#dashboard .dash-bar').length;")
    assert bars == len(record["histogram"])
    assert browser.js("return document.querySelector('#dashboard .dash-token.chosen') !== null;")
    # search by layer and index
    target = next(r for r in index["features"] if r["layer"] == 1 and r["density"] > 0)
    browser.js(
        "document.getElementById('layer').value = arguments[0];"
        "document.getElementById('feature').value = arguments[1]; document.getElementById('go').click();",
        target["layer"],
        target["feature"],
    )
    assert (
        browser.js("return document.querySelector('#dashboard h3').textContent;")
        == f"L1 F{target['feature']}"
    )
    rows = browser.js(
        "return Array.from(document.querySelectorAll('#features tbody tr td:first-child')).map(t => t.textContent);"
    )
    assert set(rows) == {"1"}
    assert browser.console_errors() == [] and browser.network_requests() == []


def test_page_served_reads_the_full_file(browser, folder, served):  # noqa: F811
    out, densest, record = folder
    browser.reset_logs()
    browser.driver.get(f"{served}/features/tc/index.html")
    browser.js("document.querySelector('#features tbody tr').click();")
    full = [len(g["examples"]) for g in record["examples_quantiles"]]
    browser.driver.implicitly_wait(0)
    for _ in range(100):
        groups = _groups(browser)
        if groups and [n for _, n in groups] == full:
            break
        browser.js("return new Promise(r => setTimeout(r, 50));")
    assert [n for _, n in _groups(browser)] == full and sum(full) > COMPACT_TOP + COMPACT_GROUP
    assert "Embedded summary" not in browser.js("return document.getElementById('dashboard').textContent;")
    assert browser.console_errors() == []
    assert all(u.startswith(served) for u in browser.network_requests())
    assert f"{served}/features/tc/{densest['featureIndex']}.json" in browser.network_requests()


def test_viewer_shows_a_feature_nodes_dashboard(browser, folder, served):  # noqa: F811
    out, _, _ = folder
    doc = json.loads((out / "graph.json").read_text())
    node = next(n for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder")
    record = json.loads((out / "features" / "tc" / f"{node['feature']}.json").read_text())
    click = (
        "document.querySelector(`svg .node[data-id='${arguments[0]}']`).dispatchEvent(new Event('click'));"
    )
    browser.open_file(out / "index.html")
    browser.js(click, node["uid"])
    text = browser.js("return document.getElementById('details').textContent;")
    assert (
        "Dashboard" in text
        and "Embedded summary" in text
        and f"L{record['layer']} F{record['feature']}" in text
    )
    assert browser.js("return document.querySelectorAll('#dashboard .dash-bar').length;") == len(
        record["histogram"]
    )
    assert browser.console_errors() == [] and browser.network_requests() == []
    # served: the full file
    browser.reset_logs()
    browser.driver.get(f"{served}/index.html")
    browser.js(click, node["uid"])
    full = [len(g["examples"]) for g in record["examples_quantiles"]]
    for _ in range(100):
        if [n for _, n in _groups(browser)] == full:
            break
        browser.js("return new Promise(r => setTimeout(r, 50));")
    assert [n for _, n in _groups(browser)] == full
    assert browser.console_errors() == [] and all(u.startswith(served) for u in browser.network_requests())
