"""The JSON a page embeds, read back and replaced: the rest of the page is kept byte for byte, and a string that
would close the element stays inside it."""

from __future__ import annotations

import pytest

from interp.report.embedded import embedded_json, replace_embedded_json

PAGE = (
    '<html><script type="application/json" id="other">{"a": 1}</script>\n'
    '<script type="application/json" id="data">{"x": [1, 2]}</script><script>run();</script></html>'
)


def test_replacing_keeps_the_rest_of_the_page_and_escapes():
    assert embedded_json(PAGE, "data") == {"x": [1, 2]} and embedded_json(PAGE, "other") == {"a": 1}
    value = {"x": "</script><script>alert(1)</script>", "y": 0.1234}
    page = replace_embedded_json(PAGE, "data", value, digits=17)
    assert embedded_json(page, "data") == value and embedded_json(page, "other") == {"a": 1}
    head, tail = PAGE.split('{"x": [1, 2]}')
    assert (
        page.startswith(head) and page.endswith(tail) and page.count("</script>") == PAGE.count("</script>")
    )
    assert embedded_json(PAGE, "missing") is None


def test_a_page_without_the_element_is_refused():
    with pytest.raises(ValueError, match='no <script type="application/json" id="missing">'):
        replace_embedded_json(PAGE, "missing", {})
