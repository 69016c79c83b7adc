"""The explainer page: a template filled with the data it shows, embedded once.

The page's body, CSS and JavaScript are package data files (``explainer.html``, ``explainer.css``,
``explainer.js`` in :mod:`interp.report.assets`), put in the one page shell (:mod:`interp.report.shell`). The
page is one file that opens from the file system: CSS and JS inline, data in a
``<script type="application/json">`` written by :func:`~interp.report.json_for_script`, the same
Content-Security-Policy as reports (inline code and ``data:`` images only). The only strings from outside put
into the markup by Python are the text and the model's name, through ``html.escape``; tokens are inserted by
the script with ``textContent``, never ``innerHTML``. Nothing time-dependent is written, so the same data give
the same bytes.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

from interp.atomic import write_atomic
from interp.report.assets import fill, read_asset
from interp.report.serialize import json_for_script
from interp.report.shell import render_shell

DIGITS = 3
"""Significant digits of the floats embedded in the page."""


def render_explainer(data: dict[str, Any]) -> str:
    """The complete explainer page for ``data`` (from :func:`interp.report.explain.explain_data`)."""
    text = str(data["text"])
    short = text if len(text) <= 80 else text[:77] + "..."
    body = fill(
        read_asset("explainer.html"), {"model": escape(str(data["model"]["name"])), "text": escape(text)}
    )
    return render_shell(
        title=f"Attention explained: {short}",
        body=body,
        css=[read_asset("explainer.css")],
        data={"explain-data": json_for_script(data, digits=DIGITS)},
        scripts=[read_asset("explainer.js")],
    )


def save_page(page: str, path: str | os.PathLike[str]) -> Path:
    """Write a page to ``path`` (UTF-8, atomically: an earlier page stays whole until the new one is), creating
    its folder, and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: tmp.write_text(page, encoding="utf-8"))
    return path
