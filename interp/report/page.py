"""Assembling ``index.html`` from a report's blocks.

The page is one file in the one page shell (:mod:`interp.report.shell`): CSS and JS inline (``report.css`` and
``report.js`` from :mod:`interp.report.assets`), figures as data URIs, the results in a
``<script type="application/json">`` element written by :func:`json_for_script`. Every string from outside the
project's code passes through ``html.escape`` on its way in. Nothing time-dependent goes into the page, so two
runs with the same seed write the same bytes.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from interp.report.assets import read_asset
from interp.report.blocks import Block, Headline, SectionBlock
from interp.report.serialize import json_for_script
from interp.report.shell import render_shell
from interp.report.text import render_inline

MAX_EMBEDDED_RESULTS_BYTES = 2**20
"""Results larger than this as JSON stay in ``results.json`` only, to keep the page small."""


def render_page(
    *,
    title: str,
    subtitle: str | None,
    headline: Mapping[str, Headline],
    blocks: Sequence[Block],
    findings: Sequence[tuple[str, str, str]] = (),
    provenance: Mapping[str, Any],
    results: Mapping[str, Any],
    extra_css: Sequence[str] = (),
    extra_js: Sequence[str] = (),
) -> str:
    """The complete HTML page.

    Args:
        title: Page title (escaped here).
        subtitle: One line under the title (escaped here), or ``None``.
        headline: Key numbers for the box at the top, by label.
        findings: ``(text, section title, anchor)``: "What we found", each line linked to its section.
        blocks: Sections, prose, figures, tables and widgets, in order.
        provenance: The manifest fields that do not depend on time (see :func:`render_provenance`).
        results: The ``results.json`` dict, embedded (up to :data:`MAX_EMBEDDED_RESULTS_BYTES`) for the
            page's own viewer and for readers' scripts, as ``<script id="interp-results">``.
        extra_css: Stylesheets that widgets need, each included once.
        extra_js: Scripts that widgets need, each included once, after the content.
    """
    sections = [b for b in blocks if isinstance(b, SectionBlock)]
    toc = "".join(f'<li><a href="#{escape(s.anchor)}">{escape(s.title)}</a></li>' for s in sections)
    toc += '<li><a href="#provenance">Provenance</a></li>'
    if findings:
        toc = '<li><a href="#findings">What we found</a></li>' + toc
    box = "".join(h.render(label) for label, h in headline.items())
    data = json_for_script(results)
    embed = len(data.encode("utf-8")) <= MAX_EMBEDDED_RESULTS_BYTES
    body = [
        f'<nav id="toc"><h2>Contents</h2><ul>{toc}</ul></nav>',
        "<main>",
        f'<header><h1 id="top">{escape(title)}</h1>',
        f'<p class="subtitle">{escape(subtitle)}</p>' if subtitle else "",
        "</header>",
        f'<section class="headline" aria-label="Key numbers">{box}</section>' if box else "",
        _render_findings(findings),
        _render_blocks(blocks),
        render_provenance(provenance, results_embedded=embed),
        "</main>",
    ]
    return render_shell(
        title=title,
        body="\n".join(p for p in body if p),
        css=[read_asset("report.css"), *_unique(extra_css)],
        data={"interp-results": data} if embed else None,
        scripts=[read_asset("report.js")],
        extra_scripts=_unique(extra_js),
    )


def _render_findings(findings: Sequence[tuple[str, str, str]]) -> str:
    if not findings:
        return ""
    items = "".join(
        f'<li>{render_inline(text)} <a class="see" href="#{escape(anchor)}">{escape(title)}</a></li>'
        for text, title, anchor in findings
    )
    return f'<section id="findings" class="findings"><h2>What we found</h2><ul>{items}</ul></section>'


def _render_blocks(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    open_section = False
    for block in blocks:
        if isinstance(block, SectionBlock):
            if open_section:
                out.append("</section>")
            out.append(f'<section id="{escape(block.anchor)}">')
            open_section = True
        out.append(block.render())
    if open_section:
        out.append("</section>")
    return "\n".join(out)


def render_provenance(p: Mapping[str, Any], *, results_embedded: bool = True) -> str:
    """The closing section: model and data hashes, seed, command, versions, config, and the raw results."""
    rows: list[tuple[str, str]] = []
    model = p.get("model")
    if model:
        sha = model.get("sha256")
        rows.append(
            ("model", f"{model.get('name') or model.get('path')}" + (f"  sha256 {sha}" if sha else ""))
        )
    for d in p.get("data", ()):
        rows.append(("data", f"{d['path']}  sha256 {d['sha256']}"))
    rows.append(("seed", "none" if p.get("seed") is None else str(p["seed"])))
    for key in ("device", "dtype"):
        if p.get(key):
            rows.append((key, str(p[key])))
    rows.append(("command", shlex.join(p.get("command", []))))
    versions = ", ".join(f"{k} {v}" for k, v in p.get("versions", {}).items() if v is not None)
    rows.append(("versions", versions))
    source = p.get("source")
    if source:
        rows.append(("source", source["commit"] + (" (with uncommitted changes)" if source["dirty"] else "")))
    dl = "".join(f"<dt>{escape(k)}</dt><dd><code>{escape(v)}</code></dd>" for k, v in rows)
    config = json.dumps(p.get("config", {}), indent=2, sort_keys=True, ensure_ascii=False)
    return (
        '<section id="provenance"><h2>Provenance</h2>'
        f'<dl class="provenance">{dl}</dl>'
        '<p class="note">Times, hashes of every file and the platform are in '
        '<a href="manifest.json">manifest.json</a>; the numbers below are '
        '<a href="results.json">results.json</a>.</p>'
        f"<details><summary>config</summary><pre>{escape(config)}</pre></details>"
        + (
            '<details id="results-details"><summary>results.json</summary>'
            '<pre id="results-json"></pre></details>'
            if results_embedded
            else '<p class="note">results.json is too large to embed in this page; open the file.</p>'
        )
        + "</section>"
    )


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))
