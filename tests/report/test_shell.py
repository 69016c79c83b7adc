"""Every page the project writes is the one page shell around its own body, styles, data and scripts."""

from __future__ import annotations

import html
import json
import re

import pytest
import torch

from interp.report.assets import CONTENT_SECURITY_POLICY, read_asset
from interp.report.explainer_page import render_explainer
from interp.report.page import render_page
from interp.report.patterns import attention_pattern
from interp.report.serialize import json_for_script
from interp.report.shell import render_shell
from interp.sae.dashboards.page import POLICY
from interp.sae.dashboards.page import render_page as render_dashboards
from tests.report.pages import explainer_data, report_page_inputs

HEAD = re.compile(
    r'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
    r'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    r'<meta http-equiv="Content-Security-Policy" content="(?P<csp>[^"]*)">\n'
    r"<title>(?P<title>[^<]*)</title>\n<style>\n"
)


def _dashboard_page(tmp_path) -> str:
    index = {
        "scan": "tc",
        "n_tokens": 10,
        "features": [{"layer": 1, "feature": 2, "featureIndex": 8, "density": 0.5, "act_max": 2.0}],
    }
    return render_dashboards(tmp_path, index)


def _viewer_page() -> str:
    from interp.circuits.features.viewer import render_viewer

    data = {"metadata": {"prompt": "a <b>", "prompt_tokens": ["a"]}, "nodes": [], "links": []}
    return render_viewer(data)


def test_every_page_has_the_shells_head_and_one_script_after_its_data(tmp_path):
    pages = {
        "report": (render_page(**report_page_inputs()), CONTENT_SECURITY_POLICY, "interp-results"),
        "explainer": (render_explainer(explainer_data()), CONTENT_SECURITY_POLICY, "explain-data"),
        "dashboards": (_dashboard_page(tmp_path), POLICY, "dashboard-data"),
        "viewer": (_viewer_page(), POLICY, "graph-data"),
    }
    dom = read_asset("dom.js")
    for name, (page, policy, data_id) in pages.items():
        head = HEAD.match(page)
        assert head, name
        assert html.unescape(head["csp"]) == policy, name
        assert page.endswith("</script>\n</body></html>\n"), name
        tail = page[page.index(f'<script type="application/json" id="{data_id}">') :]
        code = re.findall(r"<script>\n(.*?)</script>", tail, re.S)
        assert len(code) == 1 and code[0].startswith(dom), name  # dom.js first, the page's scripts after it
        assert page.count("window.interpDom = ") == 1, name
    # only the pages that draw SVG carry svg.js (and with it the namespace's address); only the dashboards page
    # numbers features itself
    assert [read_asset("svg.js") in page for page, _, _ in pages.values()] == [False, False, True, True]
    assert [read_asset("feature_id.js") in page for page, _, _ in pages.values()] == [
        False,
        False,
        True,
        False,
    ]


def test_a_page_without_scripts_has_no_helpers(tmp_path):
    page = render_shell(title="t", body="<p>x</p>")
    assert "<script" not in page and HEAD.match(page)
    saved = attention_pattern(["a", "b"], torch.tensor([[1.0, 0.0], [0.5, 0.5]])).save(tmp_path / "p.html")
    text = saved.read_text(encoding="utf-8")
    assert (
        HEAD.match(text)["title"] == "attention"
        and "<script" not in text
        and "<div class='patterns'>" in text
    )


def test_title_is_escaped_and_data_blocks_come_before_the_code():
    page = render_shell(
        title="a <b> & c", body="", data={"d": json_for_script({"x": "</script>"})}, scripts=["run();"]
    )
    assert "<title>a &lt;b&gt; &amp; c</title>" in page
    data = page.index('<script type="application/json" id="d">')
    assert data < page.index("<script>\n") < page.index("run();</script>")
    block = page[data:].split(">", 1)[1].split("</script>", 1)[0]
    assert json.loads(block) == {"x": "</script>"}


def test_extra_scripts_run_each_in_an_element_of_its_own():
    page = render_shell(title="t", body="", scripts=["a();"], extra_scripts=["b();", "c();"])
    assert re.findall(r"<script>\n?(.*?)</script>", page, re.S)[1:] == ["b();", "c();"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scripts": ['x = "</script>";']}, r"a script holds '</script' \('x = \"</script>\";'\)"),
        ({"extra_scripts": ["</SCRIPT >"]}, r"a script holds '</script'"),
        ({"css": ["p::after { content: '</style>'; }"]}, r"a style holds '</style'"),
        ({"data": {"d": '{"x": "</script>"}'}}, r"data block 'd' holds '<': write it with json_for_script"),
    ],
)
def test_code_or_data_that_would_end_its_element_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        render_shell(title="t", body="", **kwargs)
