"""A feature's page, ``GET /feature?source=S&index=I``: its label, its dashboard, and its activations on a prompt.

The dashboard is the one a scan in the named folders holds for the served dictionary, where there is one
(:meth:`~interp.serve.pages.labels.Labels.scan_with`), drawn from its file as the dashboard page draws it.
Without one, ``GET /api/feature`` computes what can be known at once, and says that this is what is shown:
the tokens its decoder promotes and suppresses through the unembedding
(:func:`~interp.sae.dashboards.logits.top_tokens`, the dashboards' own reading) and its nearest features by
decoder cosine (:func:`~interp.analysis.decoder_similarity.decoder_similarity`). The examples where it fires
most need a pass over a corpus (``interp dashboards``), which is not done while a page waits. A prompt given to
the page shows the feature's activation at each of its tokens, from Neuronpedia's ``/v1/activation/single``.
"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter, Request

from interp.analysis.decoder_similarity import decoder_similarity
from interp.feature_id import FeatureId
from interp.serve.errors import RequestError
from interp.serve.pages.page import render, respond
from interp.serve.pages.state import workbench
from interp.serve.work import compute

router = APIRouter()
N_TOKENS = 10
"""Tokens promoted and suppressed shown."""
N_NEIGHBOURS = 10
"""Nearest features by decoder shown."""


@router.get("/feature")
async def feature_page(request: Request) -> object:
    from interp.report.assets import read_asset
    from interp.sae.dashboards.page import asset as dashboard_asset

    served = request.app.state.served
    scripts = [read_asset("svg.js"), dashboard_asset("dashboard.js")]
    return respond(
        render(served, "feature", "A feature", scripts=scripts, css=[dashboard_asset("dashboard.css")])
    )


@router.get("/api/feature")
async def feature(source: str, index: str, request: Request) -> dict:
    served = request.app.state.served
    found = served.sources.get(source)
    if not index.strip().isdigit():
        raise RequestError(400, f"index {index!r} is not a whole number; give a feature's index such as 12")
    feature = found.check_index(int(index))
    labels = await workbench(request).current_labels()
    label = labels.of(found.set_name, found.layer, feature)
    scan = labels.scan_with(found.set_name, found.layer, feature)
    dictionary = found.dictionary
    out = {
        "source": found.name,
        "set": found.set_name,
        "layer": found.layer,
        "index": feature,
        "featureIndex": FeatureId(found.layer, feature).index,
        "reads": dictionary.input_hook(found.layer),
        "writes": [dictionary.output_hook(o) for o in dictionary.output_layers(found.layer)],
        "label": None if label is None else label.to_json(),
        "dashboard": None if scan is None else {"folder": scan.folder, "path": scan.path, "scan": scan.scan},
    }

    def run(cancel: Any) -> dict:
        return {
            **out,
            "live": live_summary(served.model, dictionary, found.layer, feature, labels, found.set_name),
        }

    return await compute(request, run)


def live_summary(model: Any, dictionary: Any, layer: int, feature: int, labels: Any, set_name: str) -> dict:
    """What is known of a feature without a corpus: the tokens its decoder promotes and suppresses (``None``
    with the reason where its decoder does not write the residual stream) and its nearest features by decoder
    cosine, each with its label."""
    from interp.sae.dashboards.logits import logit_rows, output_hook, top_tokens

    rows = logit_rows(dictionary, layer, torch.tensor([feature]))
    found = top_tokens(model, rows, N_TOKENS)
    tokenizer = model.tokenizer
    if found is None:
        logits = {
            "promotes": None,
            "suppresses": None,
            "why": f"its decoder writes {output_hook(dictionary, layer)}, which the unembedding does not read",
        }
    else:
        logits = {
            "promotes": tokenizer.to_str_tokens(found[0][0].tolist()),
            "suppresses": tokenizer.to_str_tokens(found[1][0].tolist()),
        }
    with torch.no_grad():
        row = dictionary.decoder(layer, torch.tensor([feature]))[0, 0].float()  # [d_out]: into its own layer
    k = min(N_NEIGHBOURS + 1, dictionary.n_features(layer))
    similarities, features = decoder_similarity(dictionary, layer, row, k)
    neighbours = []
    for cosine, other in zip(similarities.tolist(), features.tolist(), strict=True):
        if other == feature:
            continue
        label = labels.of(set_name, layer, other)
        neighbours.append({"index": other, "cosine": cosine, "label": None if label is None else label.text})
    return {**logits, "neighbours": neighbours[:N_NEIGHBOURS]}
