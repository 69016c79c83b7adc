"""A workbench page: the project's one page shell around the page's body, with what every page shares.

Each page is :func:`~interp.report.shell.render_shell` with the workbench's navigation, its own body template
(``assets/NAME.html``), styles and scripts, and two data blocks: ``workbench`` (:func:`info`: the model, the
source sets and their sources, what the server can do) and ``page-data`` (what the page shows, where it is
known on the server). The policy is the dashboards' (inline code, nothing from the network; reads of this
server only, ``connect-src 'self'``), so a page loads nothing from outside the server and calls only its
JSON routes. Responses also say not to be framed, sniffed or cached, and to send no referrer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from fastapi.responses import HTMLResponse

from interp.report.assets import fill, read_asset
from interp.report.serialize import json_for_script
from interp.report.shell import render_shell
from interp.sae.dashboards.page import POLICY

ASSETS = "interp.serve.pages.assets"
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def asset(name: str) -> str:
    """The text of workbench asset ``name``."""
    return read_asset(name, ASSETS)


def info(served: Any) -> dict[str, Any]:
    """What every page knows of the server: the model, each source set's sources (layer, width, the hook each
    reads and those it writes), the set graphs are traced with, and the limits a page's forms respect."""
    sets = []
    traced_with = None
    for set_name, sources in served.sources.sets.items():
        rows = []
        for source in sources:
            dictionary = source.dictionary
            if dictionary is served.transcoders:
                traced_with = set_name
            rows.append(
                {
                    "name": source.name,
                    "layer": source.layer,
                    "n_features": source.n_features,
                    "reads": dictionary.input_hook(source.layer),
                    "writes": [dictionary.output_hook(out) for out in dictionary.output_layers(source.layer)],
                }
            )
        sets.append({"name": set_name, "sources": rows})
    limits = served.limits
    return {
        "model_id": served.model_id,
        "n_layers": served.model.cfg.n_layers,
        "sets": sets,
        "graphs": served.transcoders is not None,
        "transcoders": traced_with,
        "limits": {
            "max_new_tokens": limits.max_new_tokens,
            "max_top_k": limits.max_top_k,
            "max_graph_tokens": limits.max_graph_tokens,
            "max_feature_nodes": limits.max_feature_nodes,
            "max_prompt_tokens": limits.max_prompt_tokens,
        },
    }


def render(
    served: Any,
    name: str,
    title: str,
    data: Mapping[str, Any] | None = None,
    *,
    scripts: Sequence[str] = (),
    css: Sequence[str] = (),
) -> str:
    """The page ``name``: the navigation, then its body ``assets/NAME.html``; ``api.js`` (the calls every page
    makes), ``scripts`` (helpers it needs) and its own ``assets/NAME.js``."""
    body = fill(asset("nav.html"), {"model": escape(served.model_id)}) + asset(f"{name}.html")
    return render_shell(
        title=f"{title}: {served.model_id}",
        body=body,
        css=[asset("workbench.css"), *css],
        data={
            "workbench": json_for_script(info(served)),
            "page-data": json_for_script(dict(data or {})),
        },
        scripts=[asset("api.js"), *scripts, asset(f"{name}.js")],
        policy=POLICY,
    )


def respond(html: str, status: int = 200) -> HTMLResponse:
    """A page, with the headers every page gets."""
    return HTMLResponse(html, status_code=status, headers=HEADERS)
