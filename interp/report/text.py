"""Prose for reports: plain text with a few markdown-like conventions, always escaped.

Studies write their hypothesis, method and findings as text. The text is escaped first, so a token or a data
line quoted in it cannot inject markup; only then are the conventions applied to the escaped text:

- a blank line separates paragraphs;
- a block whose lines all start with ``- `` or ``* `` is a bulleted list;
- ``backticks`` mark code and ``**double stars**`` mark strong emphasis.
"""

from __future__ import annotations

import html
import re

_CODE = re.compile(r"`([^`\n]+)`")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_BULLET = re.compile(r"^\s*[-*]\s+")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def render_text(text: str) -> str:
    """HTML for ``text``: escaped, then split into paragraphs and lists.

    >>> render_text("Head `L1H4` copies <names>.\\n\\n- **one**\\n- two")
    '<p>Head <code>L1H4</code> copies &lt;names&gt;.</p>\\n<ul><li><strong>one</strong></li><li>two</li></ul>'
    """
    if not isinstance(text, str):
        raise TypeError(f"report text must be a str, got {type(text).__name__}")
    blocks = [b.strip("\n") for b in _PARAGRAPH_BREAK.split(text.strip())]
    return "\n".join(_render_block(b) for b in blocks if b.strip())


def _render_block(block: str) -> str:
    lines = block.split("\n")
    if all(_BULLET.match(line) for line in lines):
        items = "".join(f"<li>{_inline(_BULLET.sub('', line))}</li>" for line in lines)
        return f"<ul>{items}</ul>"
    return f"<p>{_inline(' '.join(line.strip() for line in lines))}</p>"


def render_inline(text: str) -> str:
    """HTML for one line of ``text`` inside another element: escaped, with ``code`` and ``**strong**``.

    >>> render_inline("head `L1H4` <b>")
    'head <code>L1H4</code> &lt;b&gt;'
    """
    if not isinstance(text, str):
        raise TypeError(f"report text must be a str, got {type(text).__name__}")
    return _inline(" ".join(text.split()))


def _inline(text: str) -> str:
    escaped = html.escape(text, quote=True)
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    return _STRONG.sub(r"<strong>\1</strong>", escaped)
