"""The offline viewer of an attribution graph: ``index.html`` beside ``graph.json``, one self-contained file.

The body, CSS and JavaScript are package data files here (``graph.html``, ``graph.css``, ``graph.js``,
``attention.js``, the panel of explained attention edges, ``supernodes.js``, the supernode editor,
``graphfile.js``, which opens the graph file and saves the page's subgraph into it, and the dashboard's script
and style from :mod:`interp.sae.dashboards`), inlined into the one page shell (:mod:`interp.report.shell`) with
the reports' Content-Security-Policy (inline code only, nothing from the network) except that it may read files
of its own origin when served. The data is the pruned Neuronpedia document plus, per feature
node, the tokens its decoder promotes, its top activating contexts and its dashboard when given, embedded once
with :func:`interp.report.json_for_script`; the script puts every string in with ``textContent``. The page is
bounded: at most :data:`MAX_LINKS` links (the strongest) and the nodes they touch, with every token and logit,
and compact dashboards up to :data:`DASHBOARD_BYTES`. Opened from a file, a clicked feature shows its embedded
dashboard; served over http (``python -m http.server`` in the graph's folder), it reads the feature's full
file from ``features/SCAN/``. The file's ``interp`` extension (explained attention, the saved subgraph) is
embedded with the data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import torch

from interp.circuits.features.neuronpedia import pruned_parts, shown_rows
from interp.feature_id import FeatureId
from interp.report.assets import fill, read_asset
from interp.report.serialize import json_for_script
from interp.report.shell import render_shell
from interp.sae.dashboards.page import POLICY
from interp.sae.dashboards.page import asset as dashboard_asset

MAX_LINKS = 4000
DASHBOARD_BYTES = 2_000_000
MAX_CONTEXTS = 5
MAX_CONTEXT_CHARS = 300
N_PROMOTED = 6
DATA_ID = "graph-data"
"""The id of the script element in which the page embeds its data (what graph.js and attention.js read, and
where :mod:`~interp.circuits.features.labels` relabels a page built before its labels)."""
SCRIPTS = ("graph.js", "attention.js", "supernodes.js", "graphfile.js")
"""The page's scripts, in the order they run (each later one uses ``window.graphViewer``)."""


def asset(name: str) -> str:
    """The text of viewer asset ``name``."""
    return read_asset(name, __name__)


def viewer_data(
    graph: Any,
    doc: dict[str, Any],
    *,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    model: Any = None,
    transcoders: Any = None,
    contexts: Mapping[tuple[int, int], Sequence[str]] | None = None,
    dashboards: Path | None = None,
) -> dict[str, Any]:
    """What the page shows: the pruned graph (bounded; nodes keyed by their own names, ``uid``), node sizes
    (influence), features' promoted tokens, contexts and compact dashboards (from the dashboards folder
    ``dashboards``, ``OUT/features/SCAN``), and ``doc``'s metadata."""
    records, edges = pruned_parts(graph, node_threshold, edge_threshold)
    edges = sorted(edges, key=lambda e: -abs(e[2]))[:MAX_LINKS]
    rows = shown_rows(graph, records, edges)
    influence = graph.influence() + graph.logit_weights  # logits sized by their probability
    features: dict[str, dict[str, Any]] = {}
    for i in rows:
        node = graph.nodes[i]
        if node.kind != "feature":
            continue
        info: dict[str, Any] = {
            "index": node.feature,
            "featureIndex": FeatureId(node.layer, node.feature).index,
        }
        if model is not None and transcoders is not None:
            info["promotes"] = _promoted(model, transcoders, node.layer, node.feature)
        if contexts is not None:
            found = contexts.get((node.layer, node.feature), ())
            info["contexts"] = [str(c)[:MAX_CONTEXT_CHARS] for c in list(found)[:MAX_CONTEXTS]]
        features[str(node)] = info
    if dashboards is not None:
        _add_dashboards(graph, rows, features, dashboards)
    replacement, completeness = graph.scores()
    return {
        "dashboards": None if dashboards is None else f"features/{dashboards.name}",
        "metadata": doc["metadata"],
        "qParams": doc["qParams"],  # the subgraph by Neuronpedia ids, read where the extension has none
        "n_layers": graph.n_layers,
        "nodes": [records[i] for i in rows],
        "links": [
            {"source": str(graph.nodes[s]), "target": str(graph.nodes[t]), "weight": w} for t, s, w in edges
        ],
        "sizes": {str(graph.nodes[i]): float(influence[i]) for i in rows},
        "features": features,
        "scores": {"replacement": replacement, "completeness": completeness},
        "interp": doc.get("interp", {}),  # explained attention and the saved subgraph (extension.py)
    }


def _add_dashboards(graph: Any, rows: list[int], features: dict[str, dict], folder: Path) -> None:
    """Embed the compact dashboards of the feature nodes ``rows``, strongest first, within DASHBOARD_BYTES."""
    from interp.sae.dashboards.link import records_of
    from interp.sae.dashboards.page import compact

    nodes = [graph.nodes[i] for i in rows if graph.nodes[i].kind == "feature"]
    found = records_of(folder, sorted({(n.layer, n.feature) for n in nodes}))
    used = 0
    for node in nodes:
        record = found.get((node.layer, node.feature))
        if record is None or "dashboard" in features[str(node)]:
            continue
        small = compact(record)
        used += len(json.dumps(small, ensure_ascii=False))
        if used > DASHBOARD_BYTES:
            break
        for other in nodes:  # the same feature at other positions shares the dashboard
            if (other.layer, other.feature) == (node.layer, node.feature):
                features[str(other)]["dashboard"] = small


def render_viewer(data: dict[str, Any]) -> str:
    """The complete page for ``data`` (from :func:`viewer_data`)."""
    prompt = str(data["metadata"].get("prompt", ""))
    short = prompt if len(prompt) <= 80 else prompt[:77] + "..."
    return render_shell(
        title=f"Attribution graph: {short}",
        body=fill(asset("graph.html"), {"prompt": escape(prompt)}),
        css=[asset("graph.css"), dashboard_asset("dashboard.css")],
        data={DATA_ID: json_for_script(data, digits=4)},
        scripts=[read_asset("svg.js"), dashboard_asset("dashboard.js"), *(asset(name) for name in SCRIPTS)],
        policy=POLICY,
    )


def write_viewer(path: str | Path, graph: Any, doc: dict[str, Any], **extras: Any) -> Path:
    """Write the page for ``graph`` and its pruned document ``doc`` to ``path``."""
    path = Path(path)
    path.write_text(render_viewer(viewer_data(graph, doc, **extras)), encoding="utf-8")
    return path


def _promoted(model: Any, transcoders: Any, layer: int, feature: int) -> list[str]:
    """The tokens whose logits the feature raises most directly (its dashboard's ``top_logits``: the decoder
    row into the last layer it writes, through the final norm and the unembedding)."""
    from interp.sae.dashboards.logits import logit_rows, top_tokens

    rows = logit_rows(transcoders, layer, torch.tensor([feature]))
    found = top_tokens(model, rows, N_PROMOTED)
    if found is None:
        return []
    tok = getattr(model, "tokenizer", None)
    top = found[0][0].tolist()
    return tok.to_str_tokens(top) if tok is not None else [str(t) for t in top]
