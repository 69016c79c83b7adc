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

from interp.circuits.features.neuronpedia import default_vocab, node_id
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
    model: Any = None,
    transcoders: Any = None,
    contexts: Mapping[tuple[int, int], Sequence[str]] | None = None,
    vocab: int | None = None,
) -> dict[str, Any]:
    """What the page shows: ``doc`` (bounded), node sizes (influence), features' promoted tokens and contexts."""
    links = sorted(doc["links"], key=lambda link: -abs(link["weight"]))[:MAX_LINKS]
    touched = {x for link in links for x in (link["source"], link["target"])}
    nodes = [
        n for n in doc["nodes"] if n["node_id"] in touched or n["feature_type"] in ("embedding", "logit")
    ]
    influence = graph.influence() + graph.logit_weights  # logits sized by their probability
    index = _node_rows(graph, vocab if vocab is not None else default_vocab(graph))
    features: dict[str, dict[str, Any]] = {}
    for n in nodes:
        if n["feature_type"] != "cross layer transcoder":
            continue
        node = graph.nodes[index[n["node_id"]]]
        info: dict[str, Any] = {"index": node.feature}
        if model is not None and transcoders is not None:
            info["promotes"] = _promoted(model, transcoders, node.layer, node.feature)
        if contexts is not None:
            found = contexts.get((node.layer, node.feature), ())
            info["contexts"] = [str(c)[:MAX_CONTEXT_CHARS] for c in list(found)[:MAX_CONTEXTS]]
        features[n["node_id"]] = info
    replacement, completeness = graph.scores()
    return {
        "metadata": doc["metadata"],
        "n_layers": graph.n_layers,
        "nodes": nodes,
        "links": links,
        "sizes": {n["node_id"]: float(influence[index[n["node_id"]]]) for n in nodes},
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


def _node_rows(graph: Any, vocab: int) -> dict[str, int]:
    """Neuronpedia node id -> row of the graph."""
    return {node_id(graph, node, vocab): i for i, node in enumerate(graph.nodes)}


def _promoted(model: Any, transcoders: Any, layer: int, feature: int) -> list[str]:
    """The tokens whose logits the feature's decoder row (into its own layer) raises most, directly."""
    with torch.no_grad():
        row = transcoders.decoder(layer, torch.tensor([feature]))[0, 0].float()  # [d_model]
        logits = row.to(model.unembed.weight.device) @ model.unembed.weight.float()  # [d_vocab]
        top = logits.topk(min(N_PROMOTED, logits.shape[0])).indices.tolist()
    tok = getattr(model, "tokenizer", None)
    return [tok.decode([t]) if tok is not None else str(t) for t in top]
