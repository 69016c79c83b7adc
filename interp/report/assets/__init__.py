"""The CSS, JavaScript and HTML templates of the pages, as package data files, and the one way to read them.

The files next to this module are those of reports and the explainer (``report.css``, ``report.js``,
``explainer.css``, ``explainer.js``, ``explainer.html``), the attention pictures (``patterns.css``) and what
every page shares: the page shell (``shell.html``, filled by :mod:`interp.report.shell`), the DOM helpers every
page script uses (``dom.js``) and a feature's number (``feature_id.js``). The graph viewer's and the dashboards'
own assets sit in their packages (:mod:`interp.circuits.features.viewer`, :mod:`interp.sae.dashboards.assets`)
and are read with the same :func:`read_asset`. Editors and linters see the files as what they are, and
:mod:`importlib.resources` finds them in an installed wheel as in a checkout. They are inlined into each page
rather than linked, so that a page opens from the file system with no other file and no network. The page's
Content-Security-Policy allows only inline styles and scripts and ``data:`` images, so a page that tried to
load anything else would fail loudly (a console error) instead of quietly phoning out.

A template marks where values go with ``{{name}}``; :func:`fill` puts each value in once, in a single pass,
so a value that itself contains ``{{...}}`` (a user's text, a script) is never filled again. Values must be
escaped by the caller: ``html.escape`` for markup, :func:`interp.report.json_for_script` for data.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "font-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'"
)

_MARK = re.compile(r"\{\{([a-z_]+)\}\}")


@cache
def read_asset(name: str, package: str = __name__) -> str:
    """The text of asset ``name`` (such as ``"explainer.js"``) of ``package``, read once per process.

    Raises:
        FileNotFoundError: No such asset; the message lists those that exist.
    """
    files = resources.files(package)
    path = files.joinpath(name)
    if not path.is_file():
        known = sorted(p.name for p in files.iterdir() if p.name.endswith((".css", ".js", ".html")))
        raise FileNotFoundError(f"no page asset {name!r} in {package}; assets: {known}")
    return path.read_text(encoding="utf-8")


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with every ``{{name}}`` replaced by ``values[name]``, in one pass.

    >>> fill("<b>{{x}}</b>", {"x": "{{x}}"})
    '<b>{{x}}</b>'

    Raises:
        KeyError: The template names a value that is not given, or a given value is not in the template.
    """
    names = set(_MARK.findall(template))
    missing, unused = sorted(names - set(values)), sorted(set(values) - names)
    if missing or unused:
        raise KeyError(f"template values: missing {missing}, not in the template {unused}")
    return _MARK.sub(lambda m: values[m.group(1)], template)
