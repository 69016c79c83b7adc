"""Prose rendering: escaped first, then paragraphs, bullets, code and strong."""

from interp.report.text import render_text


def test_paragraphs_lists_and_inline_marks():
    html = render_text("First line\ncontinues.\n\nSecond with `x<y` and **bold**.\n\n- one\n* two")
    assert html == (
        "<p>First line continues.</p>\n"
        "<p>Second with <code>x&lt;y</code> and <strong>bold</strong>.</p>\n"
        "<ul><li>one</li><li>two</li></ul>"
    )


def test_markup_in_text_is_escaped():
    html = render_text("<img src=x onerror=\"alert(1)\"> </script> 'q'")
    assert "<img" not in html and "</script>" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &lt;/script&gt; &#x27;q&#x27;" in html


def test_empty_text_renders_nothing():
    assert render_text("  \n\n ") == ""
