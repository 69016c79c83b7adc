"""attention_view from Python: a self-contained notebook fragment and a page that loads nothing."""

from __future__ import annotations

import html
import re

import pytest

from interp.report import AttentionView, attention_view
from interp.report.assets import CONTENT_SECURITY_POLICY
from tests.report.test_explain import SEED_TEXT, tiny_model


@pytest.fixture(scope="module")
def view() -> AttentionView:
    return attention_view(tiny_model(), SEED_TEXT, token="it", layer=1)


def test_repr_html_is_the_page_in_an_isolated_iframe(view):
    fragment = view._repr_html_()
    assert fragment.startswith('<iframe srcdoc="') and fragment.endswith("</iframe>")
    assert 'src="http' not in fragment and "<link" not in fragment and "<script" not in fragment
    srcdoc = re.match(r'<iframe srcdoc="([^"]*)"', fragment).group(1)
    assert html.unescape(srcdoc) == view.html
    assert 'sandbox="allow-scripts"' in fragment


def test_page_loads_nothing_from_outside(view):
    page = view.html
    assert "<link" not in page and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert f'content="{html.escape(CONTENT_SECURITY_POLICY)}"' in page


def test_view_knows_its_choice(view):
    assert (view.query, view.tokens[view.query], view.layer) == (7, "it", 1)
    assert 0 <= view.head < 4
    assert "AttentionView(token 7 'it', layer 1" in repr(view)


@pytest.mark.browser
def test_saved_page_makes_no_requests(view, tmp_path, browser):
    path = view.save(tmp_path / "sub" / "view.html")
    assert path.read_text(encoding="utf-8") == view.html
    browser.open_file(path)
    assert browser.network_requests() == []
    assert browser.console_errors() == []
    assert browser.js("return document.querySelectorAll('#pattern-row .tok').length;") == len(view.tokens)
