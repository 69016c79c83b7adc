"""The JSON a page embeds in a ``<script type="application/json" id=...>`` element, read back and replaced.

A page built from a data file (the graph viewer's ``index.html`` beside ``graph.json``) carries its data inside
itself so that it opens from the file system. When the data file changes later (labels written into a graph
file), the page's copy is brought up to date by replacing the element's content in place: the rest of the page,
its scripts and markup, is kept byte for byte. The new content is written with :func:`json_for_script`, so it
stays safe inside the element.
"""

from __future__ import annotations

import json
import re
from typing import Any

from interp.report.serialize import SIGNIFICANT_DIGITS, json_for_script


def _element(html: str, element_id: str) -> re.Match[str] | None:
    pattern = rf'(<script type="application/json" id="{re.escape(element_id)}">)(.*?)(</script>)'
    return re.search(pattern, html, flags=re.DOTALL)


def embedded_json(html: str, element_id: str) -> Any | None:
    """The value embedded in ``html``'s JSON script element ``element_id``, or ``None`` if it has none (or its
    content is not JSON)."""
    found = _element(html, element_id)
    if found is None:
        return None
    try:
        return json.loads(found.group(2))
    except json.JSONDecodeError:
        return None


def replace_embedded_json(html: str, element_id: str, value: Any, *, digits: int = SIGNIFICANT_DIGITS) -> str:
    """``html`` with the content of its JSON script element ``element_id`` replaced by ``value``.

    Raises:
        ValueError: ``html`` has no such element.
    """
    found = _element(html, element_id)
    if found is None:
        raise ValueError(f'the page has no <script type="application/json" id="{element_id}"> to replace')
    text = json_for_script(value, digits=digits)
    return html[: found.start(2)] + text + html[found.end(2) :]
