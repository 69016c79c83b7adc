"""Neuronpedia's activation endpoints: a feature's (or a direction's) activation at every token, the top
features of a source set or of each token, and a source's every active feature.

Semantics follow Neuronpedia's inference server: prompts get the BOS token first; ``activation/single`` zeroes
the BOS position and leaves it out of ``values``; ``activation/all`` ranks a source set's features by their
largest activation (or their sum at ``sort_by_token_indexes``), source by source, ties kept in order;
``ignore_bos`` zeroes (or drops) the BOS position; ``activation/source`` rounds to three decimals and leaves
out position 0. A dictionary that reads an attention layer's value mixture (``hook_z``) also gets direct
feature attribution (``dfa_values``) at the position of its largest activation. Every value comes from
:func:`~interp.analysis.feature_activations.feature_activations` and
:func:`~interp.analysis.feature_activations.direct_feature_attribution`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from fastapi import APIRouter, Request

from interp.analysis.feature_activations import direct_feature_attribution, feature_activations
from interp.serve import prompts
from interp.serve.errors import RequestError, at_most
from interp.serve.neuronpedia.models import (
    ActivationAllBatchRequest,
    ActivationAllRequest,
    ActivationSingleBatchRequest,
    ActivationSingleRequest,
    ActivationSourceRequest,
    ActivationTopkByTokenBatchRequest,
    ActivationTopkByTokenRequest,
)
from interp.serve.sources import Source
from interp.serve.work import compute

router = APIRouter()
DEFAULT_TOP_K = 5
SOURCE_DECIMALS = 3


@router.post("/activation/single")
async def activation_single(body: ActivationSingleRequest, request: Request) -> dict:
    served = request.app.state.served
    read = _single(served, body)
    prompt = read.prompt(served, body.prompt, served.limits.max_prompt_tokens)
    return await compute(request, lambda cancel: read(served, prompt))


@router.post("/activation/single-batch")
async def activation_single_batch(body: ActivationSingleBatchRequest, request: Request) -> dict:
    served = request.app.state.served
    read = _single(served, body)
    texts = _batch(served, body.prompts)
    batch = [read.prompt(served, text, served.limits.max_prompt_tokens) for text in texts]
    return await compute(request, lambda cancel: {"results": [_each(cancel, read, served, p) for p in batch]})


@router.post("/activation/all")
async def activation_all(body: ActivationAllRequest, request: Request) -> dict:
    served = request.app.state.served
    sources, n = _ranked_sources(served, body)
    prompt = _sortable(served, prompts.with_bos(served, body.prompt), body.sort_by_token_indexes)
    return await compute(request, lambda cancel: _top_features(served, sources, n, prompt, body))


@router.post("/activation/all-batch")
async def activation_all_batch(body: ActivationAllBatchRequest, request: Request) -> dict:
    served = request.app.state.served
    sources, n = _ranked_sources(served, body)
    batch = [
        _sortable(served, prompts.with_bos(served, t), body.sort_by_token_indexes)
        for t in _batch(served, body.prompts)
    ]

    def run(cancel: Any) -> dict:
        return {"results": [_each(cancel, _top_features, served, sources, n, p, body) for p in batch]}

    return await compute(request, run)


@router.post("/activation/topk-by-token")
async def activation_topk_by_token(body: ActivationTopkByTokenRequest, request: Request) -> dict:
    served = request.app.state.served
    source, k = _topk_source(served, body)
    prompt = prompts.with_bos(served, body.prompt)
    return await compute(request, lambda cancel: _top_by_token(served, source, k, prompt, body.ignore_bos))


@router.post("/activation/topk-by-token-batch")
async def activation_topk_by_token_batch(body: ActivationTopkByTokenBatchRequest, request: Request) -> dict:
    served = request.app.state.served
    source, k = _topk_source(served, body)
    batch = [prompts.with_bos(served, t) for t in _batch(served, body.prompts)]

    def run(cancel: Any) -> dict:
        return {
            "results": [_each(cancel, _top_by_token, served, source, k, p, body.ignore_bos) for p in batch]
        }

    return await compute(request, run)


@router.post("/activation/source")
async def activation_source(body: ActivationSourceRequest, request: Request) -> dict:
    served = request.app.state.served
    source = served.source(body.model, body.source)
    batch = [prompts.with_bos(served, t) for t in _batch(served, body.prompts)]

    def run(cancel: Any) -> dict:
        return {"results": [_each(cancel, _active_features, served, source, p) for p in batch]}

    return await compute(request, run)


# -- activation/single ------------------------------------------------------------------------------------------


class _Feature:
    """A source's feature, read as Neuronpedia reads it (BOS first, zeroed and left out)."""

    def __init__(self, source: Source, index: int) -> None:
        self.source, self.index = source, index

    def prompt(self, served: Any, text: str, limit: int) -> prompts.Prompt:
        prompt = prompts.with_bos(served, text, limit)
        if prompt.bos and len(prompt.ids) == 1:
            raise RequestError(
                400, "the prompt is empty: there is nothing after the BOS token to read activations at"
            )
        return prompt

    def __call__(self, served: Any, prompt: prompts.Prompt) -> dict:
        source, model = self.source, served.model
        acts = feature_activations(model, source.dictionary, prompt.ids, [source.layer])[source.layer]
        values = acts[:, self.index].clone()  # [pos]
        bos = model.tokenizer.bos_id
        is_bos = prompt.ids == bos if bos is not None else torch.zeros_like(prompt.ids, dtype=torch.bool)
        values[is_bos] = 0.0
        drop = 1 if bool(is_bos.any()) else 0
        shown = values[drop:].tolist()
        best = max(range(len(shown)), key=lambda i: (shown[i], -i))
        activation = {"values": shown, "max_value": shown[best], "max_value_index": best}
        if _reads_attention(source):
            dfa = direct_feature_attribution(
                model, source.dictionary, prompt.ids, source.layer, self.index, best + drop
            )
            dfa = dfa[drop:].tolist()
            activation.update(dfa_values=dfa, dfa_target_index=best, dfa_max_value=max(dfa))
        return {
            "activation": activation,
            "tokens": prompt.tokens[drop:],
            "tokens_is_special": prompt.special[drop:],
        }


class _Direction:
    """A vector's dot product with a hook's activation at every token (the checkpoint's own BOS convention)."""

    def __init__(self, served: Any, vector: Sequence[float], hook: str) -> None:
        model = served.model
        if hook not in model.hook_dict:
            from hooks.names import unknown_hook_message

            raise RequestError(400, "hook: " + unknown_hook_message(hook, model.hook_dict))
        self.hook, self.vector = hook, torch.tensor(vector, dtype=torch.float32)
        if not bool(torch.isfinite(self.vector).all()):
            raise RequestError(400, "the vector holds NaN or infinite values")

    def prompt(self, served: Any, text: str, limit: int) -> prompts.Prompt:
        return prompts.as_checkpoint(served, text, limit=limit)

    def __call__(self, served: Any, prompt: prompts.Prompt) -> dict:
        model = served.model
        with torch.no_grad():
            _, cache = model.run_with_cache(prompt.ids[None], names_filter=self.hook)
        acts = cache[self.hook][0].flatten(1).float()  # [pos, width]
        if acts.shape[1] != len(self.vector):
            raise RequestError(
                400, f"the vector has {len(self.vector)} values; {self.hook} has width {acts.shape[1]}"
            )
        values = (acts @ self.vector.to(acts.device)).tolist()
        best = max(range(len(values)), key=lambda i: (values[i], -i))
        activation = {"values": values, "max_value": values[best], "max_value_index": best}
        return {"activation": activation, "tokens": prompt.tokens, "tokens_is_special": prompt.special}


def _single(served: Any, body: Any) -> _Feature | _Direction:
    served.check_model(body.model)
    by_feature = body.source is not None or body.index is not None
    by_vector = body.vector is not None or body.hook is not None
    if (
        by_feature == by_vector
        or (by_feature and None in (body.source, body.index))
        or (by_vector and None in (body.vector, body.hook))
    ):
        raise RequestError(
            400, "give source and index (a feature), or vector and hook (a direction): exactly one pair"
        )
    if by_vector:
        return _Direction(served, body.vector, body.hook)
    source = served.sources.get(body.source)
    if not body.index.strip().lstrip("-").isdigit():
        raise RequestError(
            400, f'index {body.index!r} is not a whole number; give a feature\'s index such as "14057"'
        )
    return _Feature(source, source.check_index(int(body.index)))


# -- activation/all ---------------------------------------------------------------------------------------------


def _ranked_sources(served: Any, body: Any) -> tuple[list[Source], int]:
    served.check_model(body.model)
    in_set = served.sources.of_set(body.source_set)
    if body.selected_sources:
        names = {s.name for s in in_set}
        outside = [s for s in body.selected_sources if s not in names]
        if outside:
            raise RequestError(
                404,
                f"selected source {outside[0]!r} is not in source set {body.source_set!r}, which has {sorted(names)}",
            )
        chosen = [served.sources.get(name) for name in dict.fromkeys(body.selected_sources)]
    else:
        chosen = in_set
    n = 25 if body.num_results is None else body.num_results
    if n < 0:
        raise RequestError(400, f"num_results={n}; give the number of features to return, 0 or more")
    at_most("num_results", n, served.limits.max_results, "--max-results")
    return chosen, n


def _sortable(served: Any, prompt: prompts.Prompt, indexes: list[int]) -> prompts.Prompt:
    outside = [i for i in indexes if not 0 <= i < len(prompt.ids)]
    if outside:
        raise RequestError(
            400,
            f"sort_by_token_indexes {outside} are outside the prompt of {len(prompt.ids)} tokens "
            f"(0 to {len(prompt.ids) - 1})",
        )
    return prompt


def _top_features(served: Any, sources: list[Source], n: int, prompt: prompts.Prompt, body: Any) -> dict:
    model, indexes = served.model, body.sort_by_token_indexes
    layers: dict[int, list[int]] = {}
    for source in sources:
        layers.setdefault(id(source.dictionary), []).append(source.layer)
    acts: dict[tuple[int, int], torch.Tensor] = {}
    for source in sources:
        key = id(source.dictionary)
        if (key, source.layer) not in acts:
            for layer, a in feature_activations(model, source.dictionary, prompt.ids, layers[key]).items():
                acts[(key, layer)] = a
    found: list[tuple[Source, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    keys = []
    for source in sources:
        a = acts[(id(source.dictionary), source.layer)].T.clone()  # [feature, pos]
        if body.ignore_bos and prompt.bos:
            a[:, 0] = 0.0
        top, top_at = a.max(dim=1)
        sums = a[:, indexes].sum(dim=1) if indexes else torch.zeros_like(top)
        key = sums if indexes else top
        order = torch.sort(key, descending=True, stable=True).indices[:n]  # ties keep the feature order
        found.append((source, order, a, top_at, sums))
        keys.append(key[order])
    ranking = torch.sort(torch.cat(keys), descending=True, stable=True).indices[:n].tolist() if keys else []
    flat = [(f, int(i)) for f in found for i in f[1].tolist()]
    out = []
    for r in ranking:
        (source, _, a, top_at, sums), feature = flat[r]
        row = a[feature]
        entry = {
            "source": source.name,
            "index": feature,
            "values": row.tolist(),
            "sum_values": float(sums[feature]),
            "max_value": float(row[top_at[feature]]),
            "max_value_index": int(top_at[feature]),
        }
        if _reads_attention(source):
            dfa = direct_feature_attribution(
                model, source.dictionary, prompt.ids, source.layer, feature, entry["max_value_index"]
            )
            entry.update(
                dfa_values=dfa.tolist(),
                dfa_target_index=entry["max_value_index"],
                dfa_max_value=float(dfa.max()),
            )
        out.append(entry)
    return {"activations": out, "tokens": prompt.tokens}


# -- topk-by-token and source -----------------------------------------------------------------------------------


def _topk_source(served: Any, body: Any) -> tuple[Source, int]:
    source = served.source(body.model, body.source)
    k = DEFAULT_TOP_K if body.top_k is None else body.top_k
    if k < 1:
        raise RequestError(400, f"top_k={k}; give the number of features per token, 1 or more")
    at_most("top_k", k, served.limits.max_top_k, "--max-top-k")
    return source, min(k, source.n_features)


def _top_by_token(served: Any, source: Source, k: int, prompt: prompts.Prompt, ignore_bos: bool) -> dict:
    acts = feature_activations(served.model, source.dictionary, prompt.ids, [source.layer])[source.layer]
    values, features = acts.topk(k, dim=1)  # [pos, k]
    first = 1 if ignore_bos and prompt.bos else 0
    results = [
        {
            "token_position": p,
            "token": prompt.tokens[p],
            "is_special": prompt.special[p],
            "top_features": [
                {"feature_index": int(f), "activation_value": float(v)}
                for v, f in zip(values[p].tolist(), features[p].tolist(), strict=True)
            ],
        }
        for p in range(first, len(prompt.ids))
    ]
    return {"results": results, "tokens": prompt.tokens[first:]}


def _active_features(served: Any, source: Source, prompt: prompts.Prompt) -> dict:
    acts = feature_activations(served.model, source.dictionary, prompt.ids, [source.layer])[source.layer]
    active: dict[str, list[list[float]]] = {}
    positions, features = acts.nonzero(as_tuple=True)
    for p, f in zip(positions.tolist(), features.tolist(), strict=True):
        if p == 0 and prompt.bos:
            continue
        active.setdefault(str(f), []).append([p, round(float(acts[p, f]), SOURCE_DECIMALS)])
    return {"tokens": prompt.tokens, "activeFeatures": active}


# -- shared -----------------------------------------------------------------------------------------------------


def _batch(served: Any, texts: list[str]) -> list[str]:
    if not texts:
        raise RequestError(400, "prompts is empty; give at least one prompt")
    at_most("the number of prompts", len(texts), served.limits.max_prompts, "--max-prompts")
    return texts


def _each(cancel: Any, fn: Any, *args: Any) -> Any:
    """One prompt of a batch, after checking whether the batch was cancelled."""
    cancel.check()
    return fn(*args)


def _reads_attention(source: Source) -> bool:
    from hooks.names import layer_of

    hook = source.dictionary.input_hook(source.layer)
    return hook == f"blocks.{layer_of(hook)}.attn.hook_z"
