"""The one page shell: the head, data and scripts that every page the project writes shares.

Reports, the explainer, the graph viewer and the dashboard page are each one self-contained file. They differ
in their body, their styles, their data and their scripts; the rest is this shell (``shell.html`` in
:mod:`interp.report.assets`): the document's head with its Content-Security-Policy (inline code and ``data:``
images only, so a page that tried to load anything from the network would fail loudly instead of quietly
phoning out), the styles in one ``<style>``, each data block as ``<script type="application/json">``, then,
on a page with scripts, one ``<script>``: ``dom.js`` (the helpers every page script uses, as
``window.interpDom``) followed by the page's scripts, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from interp.report.assets import CONTENT_SECURITY_POLICY, fill, read_asset

_CLOSERS = {"style": "</style", "script": "</script"}


def render_shell(
    *,
    title: str,
    body: str,
    css: Sequence[str] = (),
    data: Mapping[str, str] | None = None,
    scripts: Sequence[str] = (),
    extra_scripts: Sequence[str] = (),
    policy: str = CONTENT_SECURITY_POLICY,
) -> str:
    """The complete page.

    Args:
        title: The document's title, as text (escaped here).
        body: The page's markup, trusted: every string in it from outside the project is already escaped.
        css: Stylesheets, in order, in one ``<style>`` element.
        data: Data blocks by element id, each the output of :func:`interp.report.json_for_script`, read by
            the scripts with ``JSON.parse(interpDom.byId(id).textContent)``.
        scripts: The page's scripts, in the order they run, after ``dom.js``, all in one ``<script>`` element
            (a page without scripts has neither).
        extra_scripts: Scripts that run after the page's, each in an element of its own, so that one that
            fails stops no other (a report's widgets).
        policy: The Content-Security-Policy (the dashboard page and the graph viewer also read files of their
            own origin when served).

    Raises:
        ValueError: A stylesheet or script would end its element early (it holds ``</style`` or
            ``</script``), which would turn the rest of it into markup.
    """
    for kind, texts in (("style", css), ("script", [*scripts, *extra_scripts])):
        for text in texts:
            closer = _CLOSERS[kind]
            if closer in text.lower():
                raise ValueError(
                    f"a {kind} holds {closer!r} ({_excerpt(text, closer)!r}), which would end its <{kind}> "
                    "element early; write it escaped (<\\/ in a string)"
                )
    for name, text in (data or {}).items():
        if "<" in text:
            raise ValueError(
                f"data block {name!r} holds '<': write it with json_for_script, which escapes it"
            )
    blocks = [
        f'<script type="application/json" id="{escape(name)}">{text}</script>'
        for name, text in (data or {}).items()
    ]
    code = [f"<script>\n{read_asset('dom.js')}{''.join(scripts)}</script>"] if scripts else []
    code += [f"<script>{text}</script>" for text in extra_scripts]
    return fill(
        read_asset("shell.html"),
        {
            "csp": escape(policy),
            "title": escape(title),
            "css": "".join(css),
            "body": body,
            "scripts": "\n".join(blocks + code),
        },
    )


def _excerpt(text: str, closer: str) -> str:
    at = text.lower().index(closer)
    return text[max(0, at - 20) : at + 20]
