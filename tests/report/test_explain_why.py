"""The explainer's "why here": the split scores match the model's, the difference and the twin's change add up,
and the page shows the tables for the head they were computed for (headless Chromium)."""

from __future__ import annotations

import pytest
import torch

from interp.report import attention_view
from interp.report.explain import explain_data
from interp.report.explain_why import WHY_TOP
from tests.report.test_explain import SEED_TEXT, tiny_model

TWIN_TEXT = SEED_TEXT.replace("tired", "wide")


@pytest.fixture(scope="module")
def model():
    return tiny_model(f"{SEED_TEXT} wide")


def test_why_here_scores_are_the_models(model):
    data = explain_data(model, SEED_TEXT, token="it", twin=TWIN_TEXT)
    why, layer, head = data["why"], data["layer"], data["head"]
    assert (why["layer"], why["head"]) == (layer, head)
    row = data["row"][layer, head]
    assert [k["key"] for k in why["keys"]] == row.topk(2).indices.tolist()
    scores = data["scores"][layer][head]  # the model's hook_attn_scores row
    for entry in why["keys"]:
        assert entry["score"] == pytest.approx(float(scores[entry["key"]]), rel=1e-4, abs=1e-6)
        values = [p["value"] for p in entry["pairs"]]
        assert len(values) == WHY_TOP and values == sorted(values, key=abs, reverse=True)
        assert all(p["share"] == pytest.approx(p["value"] / entry["score"]) for p in entry["pairs"])
    first, second = why["keys"]
    assert why["difference"]["total"] == pytest.approx(first["score"] - second["score"], rel=1e-4, abs=1e-6)
    twin = why["twin"]
    assert twin["text"] == TWIN_TEXT and len(twin["pairs"]) == WHY_TOP
    assert twin["total"] == pytest.approx(first["score"] - twin["score"], rel=1e-4, abs=1e-6)
    # the query "it" comes before the switch word, so in a causal model nothing changed at it
    assert twin["total"] == pytest.approx(0.0, abs=1e-5)
    assert all(p["value"] == pytest.approx(0.0, abs=1e-5) for p in twin["pairs"])


def test_a_twin_that_does_not_align_is_noted():
    model = tiny_model(f"{SEED_TEXT} A dog")
    data = explain_data(model, SEED_TEXT, token="tired", twin="A dog")
    assert "has no token covering the same characters in the twin" in data["why"]["twin"]["note"]


@pytest.mark.browser
def test_the_page_shows_why_here_for_its_head(model, tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    path = tmp_path / "why.html"
    attention_view(model, SEED_TEXT, token="it", twin=TWIN_TEXT).save(path)
    browser.open_file(path)
    data = browser.js("return JSON.parse(document.getElementById('explain-data').textContent);")
    titles = browser.js("return [...document.querySelectorAll('#why-view h3')].map(h => h.textContent);")
    assert len(titles) == 4 and titles[0].startswith("strongest key") and titles[2].startswith("why ")
    cells = browser.js(
        "return [...document.querySelectorAll('#why-view table')[0].rows[1].cells].map(c => c.textContent);"
    )
    assert cells[:2] == [
        data["why"]["keys"][0]["pairs"][0]["query"],
        data["why"]["keys"][0]["pairs"][0]["key"],
    ]
    other = (data["head"] + 1) % data["model"]["n_heads"]
    Select(browser.driver.find_element(By.ID, "head-select")).select_by_value(str(other))
    note = browser.js("return document.getElementById('why-view').textContent;")
    assert f"Computed for layer {data['layer']} head {data['head']} only" in note
    assert browser.console_errors() == []
    assert browser.network_requests() == []


def test_why_here_is_bounded_by_the_head_shown_first(model):
    data = explain_data(model, SEED_TEXT, token="it", layer=1, head=3)
    assert (data["why"]["layer"], data["why"]["head"]) == (1, 3)
    assert data["why"]["twin"] is None
    assert isinstance(data["row"], torch.Tensor)
