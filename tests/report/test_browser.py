"""Reports in a real headless Chromium: nothing injected runs, nothing is fetched, nothing errors.

The payload in every user string sets ``window.__pwned`` if its markup is ever parsed as HTML, so the check
does not depend on catching an ``alert`` that would already have run. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.support.ui import WebDriverWait

from interp.report import Report, json_for_script
from tests.report.conftest import PAYLOAD

pytestmark = pytest.mark.browser


def test_report_opens_without_errors_requests_or_injection(tmp_path, make_report, browser):
    out = make_report(tmp_path / "report").write()
    browser.open_file(out / "index.html")

    assert browser.js("return window.__pwned;") is None
    assert browser.js("return document.querySelectorAll('img[src=x]').length;") == 0
    assert browser.js("return document.scripts.length;") == 2  # the embedded results and the page's script
    assert browser.console_errors() == []
    assert browser.network_requests() == []
    assert browser.requests()[0].startswith("file://")

    text = browser.js("return document.body.innerText;")
    assert f"Test report {PAYLOAD}" in text  # title, verbatim
    assert f"Prose with code, strong and {PAYLOAD}." in text
    assert text.count(PAYLOAD) >= 25 + 5  # table rows, section, subtitle, caption, headline label and unit
    assert browser.js("return document.title;") == f"Test report {PAYLOAD}"
    browser.screenshot("report_payload")


def test_embedded_results_round_trip_through_the_page(tmp_path, make_report, browser):
    out = make_report(tmp_path / "report").write()
    browser.open_file(out / "index.html")
    embedded = browser.js("return JSON.parse(document.getElementById('interp-results').textContent);")
    assert embedded == json.loads((out / "results.json").read_text())
    assert browser.js("return document.getElementById('results-json').textContent;") == ""
    browser.driver.find_element("css selector", "#results-details summary").click()
    # the details element's toggle event is queued after the click, so wait for the viewer to fill
    WebDriverWait(browser.driver, 10).until(
        lambda driver: driver.execute_script("return document.getElementById('results-json').textContent;")
    )
    shown = browser.js("return document.getElementById('results-json').textContent;")
    assert json.loads(shown)["results"]["label"] == PAYLOAD


def test_navigation_headline_and_sticky_table_header(tmp_path, make_report, browser):
    out = make_report(tmp_path / "report").write()
    browser.open_file(out / "index.html")
    nav = browser.js("return [...document.querySelectorAll('#toc a')].map(a => a.textContent);")
    assert nav == [f"Section {PAYLOAD}", "Tables", "Provenance"]
    targets = browser.js(
        "return [...document.querySelectorAll('#toc a')]"
        ".map(a => document.getElementById(a.getAttribute('href').slice(1)) !== null);"
    )
    assert targets == [True, True, True]
    assert browser.js("return document.querySelectorAll('.headline .kpi').length;") == 2
    position = browser.js("return getComputedStyle(document.querySelector('#tab-items thead th')).position;")
    assert position == "sticky"
    loaded = browser.js("return [...document.images].every(i => i.complete && i.naturalWidth > 0);")
    assert loaded


def test_trusted_widget_with_script_data_cannot_be_broken_out_of(tmp_path, browser):
    tokens = ["</script><script>window.__pwned=1</script>", "<!--", "\u2028", "ok"]
    fragment = (
        f'<script type="application/json" id="toks">{json_for_script(tokens)}</script><ol id="out"></ol>'
    )
    js = (
        "var t = JSON.parse(document.getElementById('toks').textContent);"
        "t.forEach(function (s) { var li = document.createElement('li'); li.textContent = s;"
        " document.getElementById('out').appendChild(li); });"
    )
    report = Report(tmp_path / "r", "Widget")
    report.add_html("tokens", fragment, trusted=True, js=js)
    browser.open_file(report.write() / "index.html")
    assert browser.js("return window.__pwned;") is None
    assert browser.js("return [...document.querySelectorAll('#out li')].map(l => l.textContent);") == tokens
    assert browser.console_errors() == []
    assert browser.network_requests() == []


def test_harness_sees_console_errors_and_network_requests(tmp_path, browser):
    """A control: a page that fails and phones out must be caught, or the other tests prove nothing."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!doctype html><title>bad</title><img src='http://127.0.0.1:9/x.png'>"
        "<script>console.error('boom'); undefinedFunction();</script>"
    )
    browser.open_file(page)
    assert browser.network_requests() == ["http://127.0.0.1:9/x.png"]
    errors = browser.console_errors()
    assert any("boom" in e for e in errors)
    assert any("undefinedFunction" in e for e in errors)
    assert any("127.0.0.1:9" in e for e in errors)
