"""Attention pictures from a pattern you already have: one head, or several side by side.

:func:`attention_pattern` takes ``pattern [query, key]`` and :func:`attention_heads` takes ``[head, query,
key]`` (a cached ``hook_pattern`` of one sequence), as circuitsvis's functions of those names do; unlike
:func:`interp.report.attention_view`, nothing is recomputed from text, so an edited or averaged pattern shows
as it is. Each picture is one HTML fragment with its CSS inlined (``assets/patterns.css``), no script and no
network: it renders in a notebook offline, and ``save`` writes it as a page (in the one page shell,
:mod:`interp.report.shell`). Every cell has a tooltip with its query token, key token and weight; tokens are
escaped.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interp.report.assets import read_asset
from interp.report.explainer_page import save_page
from interp.report.figures import as_array
from interp.report.shell import render_shell

MAX_TOKENS = 512  # a [512, 512] table per head is the most a page stays usable (and bounded in size) with


class PatternView:
    """Attention patterns as an HTML fragment: shows itself in Jupyter, saves itself as a page."""

    def __init__(self, fragment: str) -> None:
        self.html = fragment

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a page holding the picture to ``path`` and return the path."""
        return save_page(render_shell(title="attention", body=self.html), path)

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"PatternView({len(self.html.encode('utf-8'))} bytes)"


def attention_pattern(tokens: Sequence[str], attention: Any, *, title: str | None = None) -> PatternView:
    """One head's pattern ``attention [query, key]`` over ``tokens`` (one per key, and per query)."""
    arr = as_array(attention, 2, "attention [query, key]")
    return attention_heads(tokens, arr[None], attention_head_names=[title or "attention"])


def attention_heads(
    tokens: Sequence[str],
    attention: Any,
    attention_head_names: Sequence[str] | None = None,
    *,
    head_names: Sequence[str] | None = None,
) -> PatternView:
    """Several heads' patterns ``attention [head, query, key]`` side by side, named ``Head 0``... by default.

    ``head_names`` is a second spelling of ``attention_head_names``.
    """
    arr = as_array(attention, 3, "attention [head, query, key]")
    names = list(attention_head_names or head_names or [f"Head {h}" for h in range(arr.shape[0])])
    tokens = [str(t) for t in tokens]
    n_heads, n_query, n_key = arr.shape
    if len(names) != n_heads:
        raise ValueError(f"{len(names)} head names for {n_heads} heads; give one name per head")
    if n_key != len(tokens) or n_query > n_key:
        raise ValueError(
            f"attention has {n_query} queries and {n_key} keys but there are {len(tokens)} tokens; pass one token "
            "per key position (and a pattern of one sequence: cache['pattern', layer][0])"
        )
    if n_key > MAX_TOKENS:
        raise ValueError(
            f"{n_key} tokens is more than a picture shows ({MAX_TOKENS}); slice the pattern first"
        )
    queries = tokens[n_key - n_query :]
    figures = [_table(name, arr[h], queries, tokens) for h, name in enumerate(names)]
    return PatternView(
        f"<style>{read_asset('patterns.css')}</style><div class='patterns'>{''.join(figures)}</div>"
    )


def _table(name: str, pattern: Any, queries: list[str], keys: list[str]) -> str:
    top = max(float(pattern.max()), 1e-12)
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    rows = []
    for q, query in enumerate(queries):
        cells = "".join(
            f"<td style='background:rgba(31,111,235,{float(w) / top:.3f})' "
            f"title='{html.escape(query, quote=True)} \u2192 {html.escape(keys[k], quote=True)}: {float(w):.3f}'></td>"
            for k, w in enumerate(pattern[q])
        )
        rows.append(f"<tr><th>{html.escape(query)}</th>{cells}</tr>")
    return (
        f"<figure><figcaption>{html.escape(name)}</figcaption><table><thead><tr><th></th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></figure>"
    )
