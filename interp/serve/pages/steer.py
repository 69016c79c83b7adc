"""The steering page, ``GET /steer``: features (by source and index) or a vector, a strength, the steered and the
default completion side by side, and how the next token's logits move.

``POST /api/steer`` takes Neuronpedia's steering request (``completion``: the very body of
``/v1/steer/completion``, checked and run by the same :class:`~interp.serve.neuronpedia.steering.Plan`, so the
texts are that endpoint's) and ``top_k``; besides the outputs it answers the next token after the prompt
without and with the steering (:func:`~interp.serve.pages.logits.next_token_changes`): the likeliest tokens
each way and the logits raised and lowered most.
"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from interp.serve import prompts
from interp.serve.errors import RequestError, at_most
from interp.serve.neuronpedia.models import SteerCompletionRequest
from interp.serve.neuronpedia.steering import Plan, completions
from interp.serve.pages.logits import next_token_changes
from interp.serve.pages.page import render, respond
from interp.serve.work import compute, stopping_hooks

router = APIRouter()


class SteerPageRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    completion: SteerCompletionRequest
    top_k: int = 10


@router.get("/steer")
async def steer_page(request: Request) -> object:
    return respond(render(request.app.state.served, "steer", "Steering"))


@router.post("/api/steer")
async def steer(body: SteerPageRequest, request: Request) -> dict:
    served = request.app.state.served
    if body.completion.stream:
        raise RequestError(422, "stream is not taken here; the page waits for both outputs")
    if body.top_k < 1:
        raise RequestError(400, f"top_k={body.top_k}; give 1 or more")
    at_most("top_k", body.top_k, served.limits.max_top_k, "--max-top-k")
    prompt = prompts.with_bos(served, body.completion.prompt)
    plan = Plan(served, body.completion, prompt, positions="all")
    model = served.model

    def run(cancel: Any) -> dict:
        outputs = completions(plan, cancel, None)
        with torch.no_grad(), model.hooks(stopping_hooks(cancel)):
            before = model(prompt.ids[None])[0, -1]
            after = model.run_with_hooks(prompt.ids[None], fwd_hooks=plan.hooks)[0, -1]
        return {
            "outputs": outputs,
            "tokens": prompt.tokens,
            "next_token": next_token_changes(model.tokenizer, before, after, body.top_k),
        }

    return await compute(request, run)
