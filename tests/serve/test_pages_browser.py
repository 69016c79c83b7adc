"""The workbench pages end to end in headless Chromium against a live server (:mod:`tests.serve.workbench`): prompt
→ features → a feature's dashboard → steering with it; a folder's graph → select nodes → ablate → the new
next token equals ``graph.intervene``; tracing a new graph with its progress bar, which then opens live;
search by words and by meaning. Each page runs with no console error and asks for nothing but the server.
One server and one browser serve the module."""

from __future__ import annotations

import html
import json
import time
from urllib.parse import quote

import pytest
import torch

from interp.analysis.feature_activations import feature_activations
from interp.analysis.node import Node
from interp.circuits.features import FeatureEdit, attribute
from interp.feature_id import FeatureId
from interp.serve import serving
from interp.serve.pages import router
from tests.report.conftest import _chromium, browser  # noqa: F401  (fixtures)
from tests.serve.helpers import post
from tests.serve.workbench import LABELS, PROMPT, build
from tests.test_tokens import needs_smollm

pytestmark = [needs_smollm, pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    import interp

    model = interp.load("smollm2-135m")
    served, graph = build(model, tmp_path_factory.mktemp("workbench"))
    with serving(served, routers=[router]) as url:
        yield served, graph, url


def wait(browser, script, *args, timeout=300):  # noqa: F811
    """The value of ``script`` once it is truthy."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = browser.js(script, *args)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"the page never satisfied: {script}")


def visit(browser, url):  # noqa: F811
    browser.reset_logs()
    browser.driver.get(url)


def clean(browser, url):  # noqa: F811
    """No console error, and nothing asked of anywhere but the server."""
    assert browser.console_errors() == []
    assert [u for u in browser.network_requests() if not u.startswith(url)] == []


def test_prompt_features_then_a_dashboard_then_steering(bench, browser):  # noqa: F811
    served, _, url = bench
    model = served.model
    visit(browser, url + "/prompt")
    browser.js("document.getElementById('prompt').value = arguments[0];", PROMPT)
    browser.js("document.getElementById('top-k').value = '100'; document.getElementById('go').click();")
    wait(browser, "return document.getElementById('features')")
    chips = browser.js(
        "return [...document.querySelectorAll('#features tr')].slice(1).map((tr) => [...tr.querySelectorAll("
        "'a.feature')].map((a) => [a.dataset.source, Number(a.dataset.index), a.textContent]));"
    )
    ids = model.to_tokens(PROMPT, prepend_bos=True).ids[0]
    assert len(chips) == len(ids) - 1  # the BOS row hidden
    acts = {
        s.name: feature_activations(model, s.dictionary, ids, [s.layer])[s.layer]
        for s in served.sources.of_set("res")
    }
    for p, row in enumerate(chips, start=1):
        values = [float(acts[source][p, index]) for source, index, _ in row]
        assert values == sorted(values, reverse=True) and all(v > 0 for v in values)
    labelled = [(s, i, text) for row in chips for s, i, text in row if s == "3-res" and i in LABELS]
    assert labelled and all(LABELS[i] in text for _, i, text in labelled)
    clean(browser, url)

    # a labelled feature opens its page: its scan's dashboard, its activations on the prompt
    source, index, _ = labelled[0]
    browser.js("document.querySelector(`a.feature[data-source='${arguments[0]}'][data-index='${arguments[1]}']`).click();",
               source, str(index))  # fmt: skip
    wait(
        browser, "return window.featurePage && document.getElementById('dashboard').dataset.state === 'scan'"
    )
    wait(browser, "return document.querySelectorAll('#acts .act-token').length")
    assert browser.js("return document.getElementById('label').textContent;") == LABELS[index]
    shown = browser.js(
        "return [...document.querySelectorAll('#acts .act-token')].map((s) => Number(s.dataset.value));"
    )
    assert shown == pytest.approx(acts[source][1:, index].tolist(), rel=1e-6, abs=1e-7)  # BOS left out
    assert browser.js("return document.querySelector('#dashboard h3').textContent;") == f"L3 F{index}"
    clean(browser, url)

    # and steers with it: default and steered side by side, as generation with the decoder row added
    browser.js("document.getElementById('steer-link').click();")
    wait(browser, "return window.steerPage && document.querySelector('.feature-row .index')")
    assert browser.js("return document.querySelector('.feature-row .source').value;") == source
    assert browser.js("return document.querySelector('.feature-row .index').value;") == str(index)
    browser.js("document.querySelector('.feature-row .strength').value = '30';"
               "document.getElementById('n-tokens').value = '5';"
               "document.getElementById('go').click();")  # fmt: skip
    wait(browser, "return document.getElementById('output-steered')")
    row = served.sources.get(source).dictionary.decoder(3, torch.tensor([index]))[0, 0]
    steered = model.generate(ids, 5, fwd_hooks=[("blocks.3.hook_resid_post", lambda x, hook: x + 30.0 * row)])
    texts = browser.js(
        "return ['default', 'steered'].map((k) => document.querySelector(`#output-${k} pre`).textContent);"
    )
    assert texts == [model.generate(ids, 5).text[0], steered.text[0]]
    assert browser.js("return document.querySelectorAll('.next-token table.raised tr').length;") == 11
    clean(browser, url)


def test_a_graph_select_ablate_and_the_new_logits(bench, browser):  # noqa: F811
    served, graph, url = bench
    model, tc = served.model, served.transcoders
    visit(browser, url + "/")
    browser.js("document.querySelector('a.live').click();")
    wait(browser, "return window.graphLive")
    clean(browser, url)
    drawn = browser.js("return [...document.querySelectorAll('svg .node.feature')].map((c) => c.dataset.id);")
    first, second = drawn[0], drawn[1]
    browser.js(
        "document.querySelector(`svg .node[data-id='${arguments[0]}']`).dispatchEvent(new Event('click'));",
        first,
    )
    browser.js(
        "const t = document.getElementById('live-target'); window.graphLive.refreshTargets(); t.value = 'selected';"
        "t.dispatchEvent(new Event('change')); document.getElementById('live-mode').value = 'constrained';"
        "document.getElementById('live-run').click();"
    )
    found = wait(browser, "return window.graphLive.last()")
    node = Node.parse(first)
    edit = FeatureEdit(node.layer, node.feature, node.position, scale=0.0)
    after = graph.intervene(model, tc, [edit], constrained=True).logits[-1].float()
    shown = found["answer"]["next_token"]["after"]
    top = after.softmax(-1).topk(10)
    assert [t["id"] for t in shown] == top.indices.tolist()
    assert [t["prob"] for t in shown] == pytest.approx(top.values.tolist(), rel=1e-5, abs=1e-7)
    cells = browser.js(
        "return [...document.querySelectorAll('#live-result table.after tr')].slice(1)"
        ".map((tr) => tr.cells[1].textContent);"
    )
    assert [float(c) for c in cells] == pytest.approx(top.values.tolist(), rel=5e-3)  # to three digits

    # a supernode of two features, free: as graph.intervene on that supernode
    browser.js("document.getElementById('pin').click();")
    browser.js(
        "document.querySelector(`svg .node[data-id='${arguments[0]}']`).dispatchEvent(new Event('click'));",
        second,
    )
    browser.js("document.getElementById('pin').click(); document.getElementById('group-name').value = 'pair';"
               "document.getElementById('group').click();")  # fmt: skip
    browser.js(
        "const t = document.getElementById('live-target'); window.graphLive.refreshTargets();"
        "t.value = 'supernode:pair';"
        "t.dispatchEvent(new Event('change')); document.getElementById('live-mode').value = 'free';"
        "document.getElementById('live-run').click();"
    )
    found = wait(browser, "const l = window.graphLive.last(); return l && l.request.nodes.length === 2 && l;")
    assert "2 feature nodes" in browser.js("return document.getElementById('live-nodes').textContent;")
    grouped = graph.subgraph(supernodes={"pair": [first, second]})
    after = grouped.intervene(model, tc, supernode="pair", scale=0.0).logits[-1].float()
    assert [t["id"] for t in found["answer"]["next_token"]["after"]] == after.softmax(-1).topk(
        10
    ).indices.tolist()
    clean(browser, url)


def test_tracing_a_new_graph_shows_its_progress_then_opens_it(bench, browser):  # noqa: F811
    served, _, url = bench
    visit(browser, url + "/")
    prompt = "The dog ran to the"
    browser.js("document.getElementById('trace-prompt').value = arguments[0];"
               "document.getElementById('trace-nodes').value = '200'; document.getElementById('trace-run').click();",
               prompt)  # fmt: skip
    seen = []
    end = time.monotonic() + 600
    while "/live/traced/" not in browser.driver.current_url and time.monotonic() < end:
        try:
            bar = browser.js(
                "const b = document.getElementById('trace-progress'); return b && [b.value, b.max];"
            )
        except Exception:  # the page is being replaced by the new graph's  # noqa: BLE001
            bar = None
        if bar and bar not in seen:
            seen.append(bar)
        time.sleep(0.05)
    assert "/live/traced/" in browser.driver.current_url
    partial = [value for value, top in seen if top == 200 and 0 < value < 200]
    assert partial and partial == sorted(partial), seen  # the bar moved through the backward passes
    wait(browser, "return window.graphLive")
    model, tc = served.model, served.transcoders
    graph = attribute(model, tc, prompt, max_feature_nodes=200, batch_size=48, progress=False)
    want = {str(n) for n in graph.nodes if n.kind == "feature"}
    drawn = set(
        browser.js("return [...document.querySelectorAll('svg .node.feature')].map((c) => c.dataset.id);")
    )
    assert drawn and drawn <= want
    assert browser.js("return document.getElementById('prompt').textContent;") == prompt
    assert browser.js("return JSON.parse(document.getElementById('graph-live').textContent).on;")
    clean(browser, url)


def test_search_by_words_and_by_meaning(bench, browser):  # noqa: F811
    _, _, url = bench
    visit(browser, url + "/search?q=dates")
    wait(browser, "return document.getElementById('result-table')")
    rows = browser.js(
        "return [...document.querySelectorAll('#result-table tr')].slice(1)"
        ".map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent]);"
    )
    assert rows == [[LABELS[7], "3-res #7"]]
    browser.js("document.getElementById('query').value = 'pets and animals';"
               "document.getElementById('mode-meaning').click(); document.getElementById('go').click();")  # fmt: skip
    wait(browser, "return window.searchPage.last() && window.searchPage.last().mode === 'meaning'")
    first = browser.js("return document.querySelector('#result-table tr:nth-child(2) td').textContent;")
    assert first == "cats and dogs"
    assert (
        post(url, "/api/prompt", {"prompt": "x", "source_set": "res"})[0] == 200
    )  # the server still answers
    clean(browser, url)


HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script>\'"&amp;'
"""Markup in a label, a prompt, a file's name or a page's title: every page must show it as text."""


def inert(browser, url):  # noqa: F811
    """Nothing the hostile text holds ran or became an element, and the page is otherwise clean."""
    assert browser.js("return window.pwned === undefined;")
    assert (
        browser.js("return [...document.querySelectorAll('img')].filter((i) => i.src.endsWith('/x')).length;")
        == 0
    )
    assert browser.js("return document.querySelectorAll('script:not([type])').length;") == 1  # the page's own
    clean(browser, url)


def test_markup_in_labels_prompts_and_names_is_shown_as_text(bench, browser):  # noqa: F811
    served, _, url = bench
    work = served.folders.roots["work"]
    ids = served.model.to_tokens(HOSTILE, prepend_bos=True).ids[0]
    source = served.sources.get("3-res")
    acts = feature_activations(served.model, source.dictionary, ids, [3])[3]
    index = next(int(f) for f in acts[1:].amax(0).argsort(descending=True) if int(f) not in LABELS)
    assert acts[1:, index].max() > 0  # it fires on the prompt, so the prompt page shows its label
    explanations = work / "explanations.jsonl"
    before = explanations.read_text(encoding="utf-8")
    row = {"feature": f"3:{index}", "layer": 3, "index": index, "featureIndex": FeatureId(3, index).index,
           "scan": "res3", "explanation": HOSTILE}  # fmt: skip
    hostile = work / "hostile"
    try:
        explanations.write_text(before + json.dumps(row) + "\n", encoding="utf-8")
        hostile.mkdir()
        (hostile / f"{HOSTILE.replace('/', '')}.html").write_text(
            f"<title>{html.escape(HOSTILE)}</title>", encoding="utf-8"
        )
        (hostile / "manifest.json").write_text(json.dumps({"title": HOSTILE}), encoding="utf-8")
        (hostile / "index.html").write_text("<title>report</title>", encoding="utf-8")

        visit(browser, url + "/")
        wait(browser, "return document.getElementById('pages-work')")
        text = browser.js("return document.body.textContent;")
        assert (
            HOSTILE in text and HOSTILE.replace("/", "") in text
        )  # the report's and the page's titles, a name
        inert(browser, url)

        query = f"prompt={quote(HOSTILE)}&set=res&k=100"
        visit(browser, f"{url}/prompt?{query}")
        wait(browser, "return document.getElementById('features')")
        chips = browser.js("return [...document.querySelectorAll('a.feature')].map((a) => a.textContent);")
        assert any(HOSTILE in chip for chip in chips)
        inert(browser, url)

        visit(browser, f"{url}/feature?source=3-res&index={index}&prompt={quote(HOSTILE)}")
        wait(browser, "return document.querySelectorAll('#acts .act-token').length")
        assert browser.js("return document.getElementById('label').textContent;") == HOSTILE
        inert(browser, url)

        visit(browser, f"{url}/search?q={quote(HOSTILE)}")
        wait(browser, "return document.getElementById('result-table')")
        assert (
            browser.js("return document.querySelector('#result-table tr:nth-child(2) td').textContent;")
            == HOSTILE
        )
        inert(browser, url)

        visit(browser, f"{url}/steer?source=3-res&index={index}&prompt={quote(HOSTILE)}&strength=4")
        browser.js("document.getElementById('n-tokens').value = '2'; document.getElementById('go').click();")
        wait(browser, "return document.getElementById('output-steered')")
        shown = browser.js("return document.querySelector('#output-default pre').textContent;")
        assert shown == served.model.generate(ids, 2).text[0]
        assert browser.js("return document.getElementById('prompt').value;") == HOSTILE
        inert(browser, url)
    finally:
        explanations.write_text(before, encoding="utf-8")
        for path in hostile.glob("*"):
            path.unlink()
        if hostile.exists():
            hostile.rmdir()
