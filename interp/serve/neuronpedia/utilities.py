"""Neuronpedia's utility endpoints: tokenizing as the server does, a feature's encoder vector, and the features
whose decoder rows point most nearly the same way as a feature's or a vector.

``util/sae-vector`` gives a feature's encoder row and the hook it reads (Neuronpedia's ``W_enc[:, index]`` and
``hook_name``): its dot product with that hook's activation, ``activation/single`` with ``vector`` and
``hook``, is the feature's pre-activation less its bias. ``util/sae-topk-by-decoder-cossim`` ranks a source's
features by the cosine of their decoder rows (what one unit writes into the source layer's output) with a
feature's row or a given vector (:func:`~interp.analysis.decoder_similarity.decoder_similarity`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from fastapi import APIRouter, Request

from interp.analysis.decoder_similarity import decoder_similarity
from interp.serve import prompts
from interp.serve.errors import RequestError, at_most
from interp.serve.neuronpedia.models import (
    TokenizeRequest,
    UtilSaeTopkByDecoderCossimRequest,
    UtilSaeVectorRequest,
)
from interp.serve.work import compute

router = APIRouter()


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, request: Request) -> dict:
    served = request.app.state.served
    served.check_model(body.model)
    prompt = prompts.as_checkpoint(served, body.text, body.prepend_bos)
    return {"tokens": prompt.ids.tolist(), "token_strings": prompt.tokens, "prepend_bos": prompt.bos}


@router.post("/util/sae-vector")
async def sae_vector(body: UtilSaeVectorRequest, request: Request) -> dict:
    served = request.app.state.served
    source = served.source(body.model, body.source)
    index = torch.tensor([source.check_index(body.index)])

    def read(cancel: Any) -> dict:
        with torch.no_grad():
            vector = source.dictionary.encoder(source.layer, index)[0]
        return {"vector": vector.float().tolist(), "hookName": source.dictionary.input_hook(source.layer)}

    return await compute(request, read)


@router.post("/util/sae-topk-by-decoder-cossim")
async def sae_topk_by_decoder_cossim(body: UtilSaeTopkByDecoderCossimRequest, request: Request) -> dict:
    served = request.app.state.served
    source = served.source(body.model, body.source)
    if (body.feature is None) == (body.vector is None):
        raise RequestError(400, "give a feature or a vector to compare with: exactly one of them")
    if body.num_results < 1:
        raise RequestError(
            400, f"num_results={body.num_results}; give the number of features to return, 1 or more"
        )
    at_most("num_results", body.num_results, served.limits.max_similar, "--max-similar")
    k = min(body.num_results, source.n_features)
    if body.feature is not None:
        served.check_model(body.feature.model, "feature.model")
        of = served.sources.get(body.feature.source)
        index = torch.tensor([of.check_index(body.feature.index)])
    else:
        direction = torch.tensor(body.vector, dtype=torch.float32)
        if direction.shape != (source.dictionary.d_out,):
            raise RequestError(
                400,
                f"the vector has {len(body.vector)} values; {source.name} writes vectors of width "
                f"{source.dictionary.d_out}",
            )

    def rank(cancel: Any) -> dict:
        with torch.no_grad():
            query = of.dictionary.decoder(of.layer, index)[0, 0] if body.feature is not None else direction
        if query.shape != (source.dictionary.d_out,):
            raise RequestError(
                400,
                f"{of.name} writes vectors of width {query.shape[0]}, {source.name} of {source.dictionary.d_out}",
            )
        values, features = decoder_similarity(source.dictionary, source.layer, query, k)
        ranked = [
            {
                "feature": {"model": served.model_id, "source": source.name, "index": int(f)},
                "cosine_similarity": float(v) if math.isfinite(float(v)) else 0.0,
            }
            for v, f in zip(values.tolist(), features.tolist(), strict=True)
        ]
        feature = None if body.feature is None else body.feature.model_dump()
        return {"feature": feature, "topk_decoder_cossim_features": ranked}

    return await compute(request, rank)
