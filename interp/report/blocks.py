"""The pieces a report is made of, each able to render itself as an HTML fragment.

A block holds what it needs to write its own files (PNG bytes, the full table) and renders its HTML from
escaped values only. The one exception is :class:`HtmlBlock`, whose fragment comes from the project's own code
and is inserted as is: such code must escape its data itself (``html.escape`` for markup, ``json_for_script``
for data in a ``<script>``).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

import pandas as pd

from interp.report.text import render_text

DEFAULT_DIGITS = 4
"""Significant digits of floats in a page's tables, unless a table says otherwise."""
CSV_DIGITS = 6
"""Significant digits of floats in a table's CSV file."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def check_name(name: str, kind: str) -> str:
    """Return ``name`` if it can be a file name and an HTML id; else raise ``ValueError`` saying what can."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise ValueError(
            f"invalid {kind} name {name!r}: use letters, digits, '_', '-' and '.', starting with a letter "
            "or digit, at most 100 characters"
        )
    return name


def format_number(value: Any, digits: int = 4) -> str:
    """Short display form of a number: ``digits`` significant digits, thousands separators for integers."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.{digits}g}"
    return str(value)


@dataclass(frozen=True)
class SectionBlock:
    """A heading that starts a section; later blocks belong to it until the next one."""

    title: str
    anchor: str

    def render(self) -> str:
        return f"<h2>{escape(self.title)}</h2>"


@dataclass(frozen=True)
class TextBlock:
    """Prose, rendered by :func:`interp.report.text.render_text`."""

    text: str

    def render(self) -> str:
        return f'<div class="prose">{render_text(self.text)}</div>'


@dataclass(frozen=True)
class FigureBlock:
    """A PNG figure, written to ``figures/NAME.png`` and inlined as a data URI.

    Tick labels that are still too close once thinned are named in the figure's ``data-crowded-ticks``
    attribute, so that a test of the page can see them.
    """

    name: str
    png: bytes
    caption: str | None
    width_px: int
    crowded_ticks: tuple[
        str, ...
    ] = ()  # tick labels still too close after thinning (see interp.report.ticks)

    @property
    def path(self) -> str:
        return f"figures/{self.name}.png"

    def render(self) -> str:
        data = base64.b64encode(self.png).decode("ascii")
        alt = escape(self.caption or self.name)
        caption = f"<figcaption>{render_text(self.caption)}</figcaption>" if self.caption else ""
        crowded = (
            f' data-crowded-ticks="{escape("; ".join(self.crowded_ticks))}"' if self.crowded_ticks else ""
        )
        return (
            f'<figure id="fig-{escape(self.name)}"{crowded}>'
            f'<img src="data:image/png;base64,{data}" alt="{alt}" '
            f'style="max-width:min(100%,{self.width_px}px)">'
            f"{caption}</figure>"
        )


@dataclass(frozen=True)
class TableBlock:
    """A table: the full frame goes to ``tables/NAME.csv``, the first ``max_rows`` rows into the HTML.

    Floats show ``digits`` significant digits in the page (per column when ``digits`` is a mapping from
    column name to digits; other columns get 4) and 6 in the CSV, also inside cells that hold lists or arrays.
    """

    name: str
    frame: pd.DataFrame = field(repr=False)
    caption: str | None
    max_rows: int
    digits: int | Mapping[str, int]
    index: bool

    def digits_of(self, column: Any) -> int:
        """Significant digits shown for ``column``'s floats."""
        if isinstance(self.digits, int):
            return self.digits
        return self.digits.get(column, DEFAULT_DIGITS)

    @property
    def path(self) -> str:
        return f"tables/{self.name}.csv"

    def columns(self) -> list[str]:
        return [_column_name(c) for c in self.frame.columns]

    def csv(self) -> str:
        """The full table as CSV; floats keep 6 significant digits so that float noise leaves it unchanged."""
        frame = self.frame
        nested = [c for c in frame.columns if frame[c].dtype == object and frame[c].map(_is_sequence).any()]
        if nested:
            frame = frame.copy()
            for c in nested:
                frame[c] = frame[c].map(lambda v: _cell(v, CSV_DIGITS) if _is_sequence(v) else v)
        return frame.to_csv(index=self.index, float_format=f"%.{CSV_DIGITS}g", lineterminator="\n")

    def render(self) -> str:
        df = self.frame
        shown = df.head(self.max_rows)
        numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
        head = "".join(f"<th>{escape(str(n))}</th>" for n in ([df.index.name or ""] if self.index else []))
        head += "".join(
            f"<th{' class=num' if num else ''}>{escape(name)}</th>"
            for name, num in zip(self.columns(), numeric, strict=True)
        )
        rows = []
        for label, values in zip(shown.index, shown.itertuples(index=False, name=None), strict=True):
            cells = f"<th>{escape(_cell(label, self.digits_of(None)))}</th>" if self.index else ""
            cells += "".join(
                f"<td{' class=num' if num else ''}>{escape(_cell(v, self.digits_of(c)))}</td>"
                for v, num, c in zip(values, numeric, df.columns, strict=True)
            )
            rows.append(f"<tr>{cells}</tr>")
        link = f'<a href="{escape(self.path)}">{escape(self.path)}</a>'
        if len(df) > len(shown):
            note = f"Showing the first {len(shown):,} of {len(df):,} rows; the full table is {link}."
        else:
            note = f"{len(df):,} rows; also as {link}."
        note = f'<p class="note">{note}</p>'
        caption = f"<figcaption>{render_text(self.caption)}</figcaption>" if self.caption else ""
        return (
            f'<figure class="table" id="tab-{escape(self.name)}">{caption}<div class="table-wrap"><table>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>{note}</figure>"
        )


@dataclass(frozen=True)
class HtmlBlock:
    """A trusted fragment from the project's own code (an interactive viewer), inserted as is."""

    name: str
    fragment: str

    def render(self) -> str:
        return f'<div class="widget" id="html-{escape(self.name)}">{self.fragment}</div>'


@dataclass(frozen=True)
class Headline:
    """One key number of a report, shown in the box at the top and written to ``results.json``."""

    value: Any
    ci: tuple[float | None, float | None] | None = None
    unit: str | None = None
    note: str | None = None

    def render(self, label: str) -> str:
        value = escape(format_number(self.value))
        unit = f' <span class="unit">{escape(self.unit)}</span>' if self.unit else ""
        ci = ""
        if self.ci is not None:
            lo, hi = (escape(format_number(c)) for c in self.ci)
            ci = f'<div class="ci">[{lo}, {hi}]</div>'
        note = f'<div class="hnote">{escape(self.note)}</div>' if self.note else ""
        return (
            f'<div class="kpi"><div class="label">{escape(label)}</div>'
            f'<div class="value">{value}{unit}</div>{ci}{note}</div>'
        )


Block = SectionBlock | TextBlock | FigureBlock | TableBlock | HtmlBlock


def _column_name(column: Any) -> str:
    if isinstance(column, tuple):
        return " / ".join(str(c) for c in column)
    return str(column)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or (hasattr(value, "tolist") and getattr(value, "ndim", 0) >= 1)


def _cell(value: Any, digits: int) -> str:
    """A table cell as text: floats to ``digits`` significant digits, also inside lists and arrays."""
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return ""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy scalars
    if _is_sequence(value):
        items = value.tolist() if hasattr(value, "tolist") else value
        return "[" + ", ".join(_item(v, digits) for v in items) + "]"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _item(value: Any, digits: int) -> str:
    """An element of a list in a cell: like a cell, but ``None`` and strings keep their Python spelling."""
    if value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return _cell(value, digits)
