"""The graph viewer, live: a graph of the named folders opened from the server with interventions on its nodes.

``GET /live/graph/NAME/PATH/`` is the viewer page a graph folder holds (``index.html``, as
:meth:`~interp.circuits.features.graph.AttributionGraph.save` wrote it) drawn again from the graph it embeds,
with the viewer's live panel (:func:`~interp.circuits.features.viewer.render_viewer`'s ``live``); every other
path under it is the folder's file, as ``/files/`` serves it, so the page reads its graph file and its
features' dashboards beside it as it does offline. Live mode needs the graph to be the server's transcoders':
before the page is drawn, the prompt's tokens (the graph's token nodes) are run through the served model and
transcoders, and each feature node's activation must come out as the graph recorded it (to the page's four
significant digits); otherwise the panel says which node differs, and the page is the offline one.

``POST /api/graph/intervene`` edits feature nodes of a prompt, set to a value or scaled (``scale: 0``
ablates), and answers the next token before and after: constrained (attention patterns, norms and every
other feature held at their values on the prompt: the graph's linear world) or free (the whole model
responds), by :func:`~interp.circuits.features.intervene.intervene`, as ``graph.intervene`` calls it; with
``n_tokens``, also the text generated without and with the edits
(:func:`~interp.circuits.features.intervene.generate_with_features`, the prompt's attention held at its
unedited patterns when ``hold_attention``).
"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, ConfigDict

from interp.analysis.feature_activations import feature_activations
from interp.analysis.node import Node
from interp.circuits.features.graph_folder import PAGE
from interp.circuits.features.intervene import FeatureEdit, generate_with_features, intervene
from interp.circuits.features.viewer import DATA_ID, render_viewer
from interp.report.embedded import embedded_json
from interp.serve import files
from interp.serve.errors import RequestError, at_most
from interp.serve.pages.logits import next_token_changes
from interp.serve.pages.page import asset, respond
from interp.serve.work import compute, stopping_hooks

router = APIRouter()
RELATIVE = 2e-3
"""How far a feature's activation on the server may be from the one a page records (rounded to four significant
digits: half a unit in the fourth is at most 5e-4 of the value) and still count as the same."""


class InterveneRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    tokens: list[int]
    nodes: list[str]
    scale: float | None = None
    value: float | None = None
    constrained: bool = False
    top_k: int = 10
    n_tokens: int = 0
    hold_attention: bool = False


@router.get("/live/graph/{name}/{path:path}")
async def live_folder(name: str, path: str, request: Request) -> object:
    served = request.app.state.served
    found = served.folders.resolve(name, path)
    page = found / PAGE if found.is_dir() else found if found.name == PAGE else None
    if page is None or not page.is_file():
        return await files.file(name, path, request)
    if found.is_dir() and path and not path.endswith("/"):
        return RedirectResponse(
            f"/live/graph/{name}/{path}/", status_code=307
        )  # so the page's own files resolve
    data = embedded_json(page.read_text(encoding="utf-8"), DATA_ID)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return await files.file(name, path, request)  # another page: as it is
    tokens, why = await compute(request, lambda cancel: check_graph(served, data))
    return respond(viewer_page(served, data, tokens, why))


def viewer_page(served: Any, data: dict[str, Any], tokens: list[int], why: str) -> str:
    """The viewer of ``data`` with the live panel: on, or off saying ``why``."""
    return render_viewer(
        data, live=live_block(served, tokens, why), live_scripts=[asset("api.js"), asset("trace.js")]
    )


def live_block(served: Any, tokens: list[int], why: str) -> dict[str, Any]:
    """What the live panel reads: whether interventions are on (else why not), the prompt's ids, and the server's
    routes and limits."""
    limits = served.limits
    return {
        "on": not why,
        "why": why,
        "model_id": served.model_id,
        "tokens": tokens,
        "intervene": "/api/graph/intervene",
        "trace": "/api/trace" if served.transcoders is not None else None,
        "home": "/",
        "max_new_tokens": limits.max_new_tokens,
        "max_top_k": limits.max_top_k,
        "max_graph_tokens": limits.max_graph_tokens,
        "max_feature_nodes": limits.max_feature_nodes,
    }


def graph_tokens(data: dict[str, Any]) -> list[int]:
    """The prompt's ids, from the page's token nodes (Neuronpedia's ids ``E_{token}_{position}``)."""
    found: dict[int, int] = {}
    for node in data["nodes"]:
        if isinstance(node, dict) and node.get("feature_type") == "embedding":
            parts = str(node.get("node_id", "")).split("_")
            if len(parts) != 3 or parts[0] != "E":
                raise ValueError(f"token node {node.get('node_id')!r} is not named E_TOKEN_POSITION")
            found[int(parts[2])] = int(parts[1])
    if not found or sorted(found) != list(range(len(found))):
        raise ValueError("the page does not hold a token node at every position of its prompt")
    return [found[p] for p in range(len(found))]


def check_graph(served: Any, data: dict[str, Any]) -> tuple[list[int], str]:
    """The graph's prompt ids, and why live interventions cannot run on it here (``""``: they can)."""
    if served.transcoders is None:
        return [], "this server was started without --transcoders, which interventions need"
    try:
        ids = graph_tokens(data)
    except (ValueError, TypeError) as err:
        return [], f"the graph cannot be read ({err})"
    model, tc = served.model, served.transcoders
    past = [t for t in ids if not 0 <= t < model.cfg.d_vocab]
    if past:
        return (
            ids,
            f"token id {past[0]} is past this model's vocabulary of {model.cfg.d_vocab}: another model's graph",
        )
    shown = data.get("metadata", {}).get("prompt_tokens")
    if shown and model.tokenizer is not None and model.tokenizer.to_str_tokens(ids) != list(shown):
        return ids, "this model's tokenizer reads the graph's token ids as other text: another model's graph"
    nodes = []
    for record in data["nodes"]:
        if record.get("feature_type") == "cross layer transcoder" and record.get("activation") is not None:
            node = Node.parse(str(record["uid"]))
            if node.layer not in tc.layers or not 0 <= node.feature < tc.n_features(node.layer):
                return ids, f"{node} is not a feature of the server's transcoders: another dictionary's graph"
            nodes.append((node, float(record["activation"])))
    if not nodes:
        return ids, ""  # no feature to compare: nothing says another dictionary made it
    layers = sorted({n.layer for n, _ in nodes})
    acts = feature_activations(model, tc, torch.tensor(ids, device=model.device), layers)
    for node, recorded in nodes:
        here = float(acts[node.layer][node.position, node.feature])
        if abs(here - recorded) > RELATIVE * abs(recorded) + 1e-6:
            return ids, (
                f"the graph was not traced with the server's transcoders: {node} is {recorded:.4g} in the graph "
                f"and {here:.4g} here"
            )
    return ids, ""


@router.post("/api/graph/intervene")
async def intervene_on_graph(body: InterveneRequest, request: Request) -> dict:
    served = request.app.state.served
    tc = served.graph_transcoders()
    model, limits = served.model, served.limits
    ids = _checked_tokens(served, body.tokens)
    edits = [_edit(node, body, tc, len(ids)) for node in body.nodes]
    if not edits:
        raise RequestError(400, "nodes is empty; give the feature nodes to edit, such as ['L3.F17@2']")
    if body.top_k < 1:
        raise RequestError(400, f"top_k={body.top_k}; give 1 or more")
    at_most("top_k", body.top_k, limits.max_top_k, "--max-top-k")
    if body.n_tokens < 0:
        raise RequestError(400, f"n_tokens={body.n_tokens}; give 0 (no generation) or more")
    at_most("n_tokens", body.n_tokens, limits.max_new_tokens, "--max-new-tokens")
    if len(ids) + body.n_tokens > model.cfg.n_ctx:
        raise RequestError(
            400,
            f"a prompt of {len(ids)} tokens and n_tokens={body.n_tokens} pass the context of {model.cfg.n_ctx}",
        )
    if body.hold_attention and body.n_tokens == 0:
        raise RequestError(
            400, "hold_attention applies to the generated text; give n_tokens > 0, or leave it out"
        )
    tokens = torch.tensor(ids, device=model.device)

    def run(cancel: Any) -> dict:
        base = intervene(model, tc, tokens, [], constrained=body.constrained)
        cancel.check()
        edited = intervene(model, tc, tokens, edits, constrained=body.constrained)
        out = {
            "mode": "constrained" if body.constrained else "free",
            "nodes": body.nodes,
            "next_token": next_token_changes(model.tokenizer, base.logits[-1], edited.logits[-1], body.top_k),
            "generated": None,
        }
        if body.n_tokens:
            with model.hooks(stopping_hooks(cancel)):
                default = model.generate(tokens, body.n_tokens)
                changed = generate_with_features(
                    model, tc, tokens, edits, body.n_tokens, hold_attention=body.hold_attention
                )
            out["generated"] = {"default": default.text[0], "edited": changed.text[0]}
        return out

    return await compute(request, run)


def _checked_tokens(served: Any, tokens: list[int]) -> list[int]:
    if not tokens:
        raise RequestError(400, "tokens is empty; give the graph's prompt as token ids")
    at_most("the number of tokens", len(tokens), served.limits.max_prompt_tokens, "--max-prompt-tokens")
    vocab = served.model.cfg.d_vocab
    past = [t for t in tokens if not 0 <= t < vocab]
    if past:
        raise RequestError(400, f"token id {past[0]} is outside this model's vocabulary (0 to {vocab - 1})")
    return tokens


def _edit(name: str, body: InterveneRequest, tc: Any, n_pos: int) -> FeatureEdit:
    try:
        node = Node.parse(name)
    except ValueError as err:
        raise RequestError(400, f"node {name!r}: {err}") from None
    if node.kind != "feature":
        raise RequestError(400, f"{name} is a {node.kind} node; only feature nodes can be set or scaled")
    if node.layer not in tc.layers or not 0 <= node.feature < tc.n_features(node.layer):
        raise RequestError(400, f"{name} is not a feature of the server's transcoders")
    if not 0 <= node.position < n_pos:
        raise RequestError(400, f"{name} is at position {node.position}, past the prompt of {n_pos} tokens")
    if (body.scale is None) == (body.value is None):
        raise RequestError(400, "give scale (0 ablates) or value, exactly one")
    return FeatureEdit(node.layer, node.feature, node.position, value=body.value, scale=body.scale)
