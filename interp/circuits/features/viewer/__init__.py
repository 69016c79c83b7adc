"""The offline viewer of an attribution graph: ``index.html`` beside ``graph.json``, one self-contained file.

The markup, CSS and JavaScript are package data files here (``graph.html``, ``graph.css``, ``graph.js``), read
with :mod:`importlib.resources` and inlined, with the reports' Content-Security-Policy (inline code only, no
network). The data is the pruned Neuronpedia document plus, per feature node, the tokens its decoder promotes
and its top activating contexts when given, embedded once with :func:`interp.report.json_for_script`; the
script puts every string in with ``textContent``. The page is bounded: at most :data:`MAX_LINKS` links (the
strongest) and the nodes they touch, with every token and logit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from interp.circuits.features.neuronpedia import pruned_parts
from interp.report.assets import CONTENT_SECURITY_POLICY, fill
from interp.report.serialize import json_for_script

MAX_LINKS = 4000
MAX_CONTEXTS = 5
MAX_CONTEXT_CHARS = 300
N_PROMOTED = 6


def asset(name: str) -> str:
    """The text of viewer asset ``name``."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def viewer_data(
    graph: Any,
    doc: dict[str, Any],
    *,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    model: Any = None,
    transcoders: Any = None,
    contexts: Mapping[tuple[int, int], Sequence[str]] | None = None,
) -> dict[str, Any]:
    """What the page shows: the pruned graph (bounded; nodes keyed by their own names, ``uid``), node sizes
    (influence), features' promoted tokens and contexts, and ``doc``'s metadata."""
    records, edges = pruned_parts(graph, node_threshold, edge_threshold)
    edges = sorted(edges, key=lambda e: -abs(e[2]))[:MAX_LINKS]
    touched = {row for t, s, _ in edges for row in (t, s)}
    rows = [i for i, r in records.items() if i in touched or r["feature_type"] in ("embedding", "logit")]
    influence = graph.influence() + graph.logit_weights  # logits sized by their probability
    features: dict[str, dict[str, Any]] = {}
    for i in rows:
        node = graph.nodes[i]
        if node.kind != "feature":
            continue
        info: dict[str, Any] = {"index": node.feature}
        if model is not None and transcoders is not None:
            info["promotes"] = _promoted(model, transcoders, node.layer, node.feature)
        if contexts is not None:
            found = contexts.get((node.layer, node.feature), ())
            info["contexts"] = [str(c)[:MAX_CONTEXT_CHARS] for c in list(found)[:MAX_CONTEXTS]]
        features[str(node)] = info
    replacement, completeness = graph.scores()
    return {
        "metadata": doc["metadata"],
        "n_layers": graph.n_layers,
        "nodes": [records[i] for i in rows],
        "links": [
            {"source": str(graph.nodes[s]), "target": str(graph.nodes[t]), "weight": w} for t, s, w in edges
        ],
        "sizes": {str(graph.nodes[i]): float(influence[i]) for i in rows},
        "features": features,
        "scores": {"replacement": replacement, "completeness": completeness},
    }


def render_viewer(data: dict[str, Any]) -> str:
    """The complete page for ``data`` (from :func:`viewer_data`)."""
    prompt = str(data["metadata"].get("prompt", ""))
    short = prompt if len(prompt) <= 80 else prompt[:77] + "..."
    return fill(
        asset("graph.html"),
        {
            "csp": escape(CONTENT_SECURITY_POLICY),
            "title": escape(f"Attribution graph: {short}"),
            "css": asset("graph.css"),
            "prompt": escape(prompt),
            "data": json_for_script(data, digits=4),
            "script": asset("graph.js"),
        },
    )


def write_viewer(path: str | Path, graph: Any, doc: dict[str, Any], **extras: Any) -> Path:
    """Write the page for ``graph`` and its pruned document ``doc`` to ``path``."""
    path = Path(path)
    path.write_text(render_viewer(viewer_data(graph, doc, **extras)), encoding="utf-8")
    return path


def _promoted(model: Any, transcoders: Any, layer: int, feature: int) -> list[str]:
    """The tokens whose logits the feature's decoder row (into its own layer) raises most, directly."""
    with torch.no_grad():
        row = transcoders.decoder(layer, torch.tensor([feature]))[0, 0].float()  # [d_model]
        logits = row.to(model.unembed.weight.device) @ model.unembed.weight.float()  # [d_vocab]
        top = logits.topk(min(N_PROMOTED, logits.shape[0])).indices.tolist()
    tok = getattr(model, "tokenizer", None)
    return [tok.decode([t]) if tok is not None else str(t) for t in top]
