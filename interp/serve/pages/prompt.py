"""The prompt page, ``GET /prompt``: a prompt's tokens, each with its top features in a source set, labelled
where the named folders explain them; a feature opens its page (:mod:`~interp.serve.pages.feature`).

``POST /api/prompt`` computes it: every source of the set on the prompt (BOS first, as Neuronpedia's server
reads prompts), with :func:`~interp.analysis.feature_activations.feature_activations` once per dictionary, and
at each position the ``top_k`` largest activations over the set's sources; features that do not fire (0) are
left out.
"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from interp.analysis.feature_activations import feature_activations
from interp.serve import prompts
from interp.serve.errors import RequestError, at_most
from interp.serve.pages.page import render, respond
from interp.serve.pages.state import workbench
from interp.serve.work import compute

router = APIRouter()


class PromptRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    prompt: str
    source_set: str
    top_k: int = 5


@router.get("/prompt")
async def prompt_page(request: Request) -> object:
    return respond(render(request.app.state.served, "prompt", "Features of a prompt"))


@router.post("/api/prompt")
async def prompt_features(body: PromptRequest, request: Request) -> dict:
    served = request.app.state.served
    sources = served.sources.of_set(body.source_set)
    if body.top_k < 1:
        raise RequestError(400, f"top_k={body.top_k}; give the number of features per token, 1 or more")
    at_most("top_k", body.top_k, served.limits.max_top_k, "--max-top-k")
    if not body.prompt.strip():
        raise RequestError(400, 'the prompt is empty; give a text, such as "The cat sat on the mat"')
    prompt = prompts.with_bos(served, body.prompt)
    labels = await workbench(request).current_labels()

    def run(cancel: Any) -> dict:
        by_dictionary: dict[int, tuple[Any, list[int]]] = {}
        for source in sources:
            by_dictionary.setdefault(id(source.dictionary), (source.dictionary, []))[1].append(source.layer)
        acts: dict[tuple[int, int], torch.Tensor] = {}
        for key, (dictionary, layers) in by_dictionary.items():
            cancel.check()
            for layer, a in feature_activations(served.model, dictionary, prompt.ids, layers).items():
                acts[(key, layer)] = a  # [pos, n_features]
        tops = []
        for source in sources:
            a = acts[(id(source.dictionary), source.layer)]
            k = min(body.top_k, a.shape[1])
            values, features = a.topk(k, dim=1)  # [pos, k]
            tops.append((source, values.cpu(), features.cpu()))
        positions = []
        for p in range(len(prompt.ids)):
            found = [
                (float(v), source, int(f))
                for source, values, features in tops
                for v, f in zip(values[p].tolist(), features[p].tolist(), strict=True)
                if v > 0
            ]
            found.sort(key=lambda x: -x[0])
            positions.append([_entry(source, f, v, labels) for v, source, f in found[: body.top_k]])
        return {"tokens": prompt.tokens, "special": prompt.special, "positions": positions}

    return await compute(request, run)


def _entry(source: Any, feature: int, value: float, labels: Any) -> dict[str, Any]:
    label = labels.of(source.set_name, source.layer, feature)
    return {
        "source": source.name,
        "layer": source.layer,
        "index": feature,
        "value": value,
        "label": None if label is None else label.text,
    }
