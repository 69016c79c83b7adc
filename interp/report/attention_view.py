"""The attention explainer as a Python object: shows itself in Jupyter, saves itself as a page.

An :class:`AttentionView` holds one self-contained HTML page. In a notebook it renders inside an
``<iframe srcdoc="...">`` (the page attribute-escaped), which keeps its CSS and JavaScript apart from the
notebook's and from other views on the same notebook page. It needs no network or CDN, so it works offline
and in JupyterLab alike.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from interp.report.explain import explain_data
from interp.report.explainer_page import render_explainer, save_page


class AttentionView:
    """One sentence's attention explained, step by step, for one token.

    Attributes:
        data: what the page shows (see :func:`interp.report.explain.explain_data`).
        html: the complete page.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.html = render_explainer(data)

    @property
    def tokens(self) -> list[str]:
        """The tokens of the text."""
        return list(self.data["tokens"])

    @property
    def query(self) -> int:
        """The position of the token followed."""
        return int(self.data["query"])

    @property
    def layer(self) -> int:
        """The layer shown first."""
        return int(self.data["layer"])

    @property
    def head(self) -> int:
        """The head shown first."""
        return int(self.data["head"])

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the page to ``path`` (UTF-8), creating its folder, and return the path."""
        return save_page(self.html, path)

    def _repr_html_(self) -> str:
        srcdoc = html.escape(self.html, quote=True)
        return (
            f'<iframe srcdoc="{srcdoc}" sandbox="allow-scripts" title="attention explainer" '
            'style="width:100%;height:860px;border:1px solid #dde1e6;border-radius:4px"></iframe>'
        )

    def __repr__(self) -> str:
        return (
            f"AttentionView(token {self.query} {self.tokens[self.query]!r}, layer {self.layer}, "
            f"head {self.head}, {len(self.html.encode('utf-8'))} bytes)"
        )


def attention_view(
    model: Any,
    text: str,
    *,
    token: str | None = None,
    layer: int | None = None,
    head: int | None = None,
    progress: bool = False,
    twin: str | None = None,
) -> AttentionView:
    """Explain how ``model`` attends from one token of ``text``, as a view for notebooks and files.

    Args:
        model: a :class:`~interp.HookedTransformer` with a tokenizer (``interp.load`` attaches one).
        text: the text to explain.
        token: the token to follow: its text (stripped, case-insensitive) or position; default: the last.
        layer: the layer shown first; default: the layer of the head chosen as below.
        head: the head shown first; default: the head that sends most attention from the token to any key
            other than the first and itself.
        progress: show a progress bar.
        twin: a twin text, whose change of the score "why here" splits too.

    Example:
        >>> view = attention_view(model, "The animal didn't cross the street because it was too tired",
        ...                       token="it")  # doctest: +SKIP
        >>> view.save("explain.html")  # doctest: +SKIP
    """
    data = explain_data(model, text, token=token, layer=layer, head=head, progress=progress, twin=twin)
    return AttentionView(data)
