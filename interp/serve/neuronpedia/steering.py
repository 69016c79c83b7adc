"""Neuronpedia's steering endpoints: a completion (or a chat reply) generated with and without steering.

A feature steers with what it writes: strength x its decoder row at each hook it writes (one for an SAE or a
per-layer transcoder, every later layer's output for a cross-layer transcoder), at every position of prompt and
completion; a vector steers at the hook it names. ``strength_multiplier`` multiplies every strength,
``normalize_steering`` divides each feature's write (all its rows together) or vector by its norm first, and
``steer_method`` picks the edit: ``SIMPLE_ADDITIVE`` adds (:func:`~interp.analysis.steering.steer`),
``ORTHOGONAL_DECOMP`` scales the activation's component along the direction by the strength
(:func:`~interp.analysis.steering_methods.project`), ``PROJECTION_CAP`` caps that component at the strength
(:func:`~interp.analysis.steering_methods.cap`). Chat prompts go through the checkpoint's chat template, and
``steer_special_tokens: false`` leaves the prompt's special tokens unsteered. ``temperature: 0`` is greedy
decoding; otherwise sampling with ``seed`` and ``freq_penalty``
(:func:`~interp.generation.generate.generate`), each type of output from the same seed. ``n_logprobs`` reports
each generated token's log-probability and the likeliest alternatives. ``stream: true`` answers with
server-sent events, ``data: {...}\\n\\n``, each holding every output so far.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import torch
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from interp.analysis.steering import steer
from interp.analysis.steering_checks import activation_shape, check_width
from interp.analysis.steering_methods import cap, project
from interp.serve import prompts
from interp.serve.errors import RequestError, at_most
from interp.serve.neuronpedia.models import SteerCompletionChatRequest, SteerCompletionRequest
from interp.serve.queue import Cancel
from interp.serve.work import compute, stopping_hooks

router = APIRouter()
EDITS = {"SIMPLE_ADDITIVE": steer, "ORTHOGONAL_DECOMP": project, "PROJECTION_CAP": cap}


@router.post("/steer/completion")
async def steer_completion(body: SteerCompletionRequest, request: Request) -> Any:
    served = request.app.state.served
    prompt = prompts.with_bos(served, body.prompt)
    plan = _Plan(served, body, prompt, positions="all")
    return await _answer(request, plan, lambda outputs: {"outputs": outputs})


@router.post("/steer/completion-chat")
async def steer_completion_chat(body: SteerCompletionChatRequest, request: Request) -> Any:
    served = request.app.state.served
    if body.is_assistant_axis:
        raise RequestError(
            422,
            "is_assistant_axis asks for Neuronpedia's persona monitoring, which needs its persona data; interp "
            "does not have it: leave it out or false",
        )
    served.check_model(body.model)
    prompt = prompts.chat(served, body.prompt)
    keep = [i for i, special in enumerate(prompt.special) if not special]
    positions = "all" if body.steer_special_tokens else [*keep, "new"]
    plan = _Plan(served, body, prompt, positions=positions)
    raw = served.model.tokenizer.decode(prompt.ids.tolist())
    messages = [{"content": m.content, "role": m.role} for m in body.prompt]

    def shape(outputs: list[dict]) -> dict:
        results = [
            {
                "chat_template": [*messages, {"content": o["output"].strip(), "role": "assistant"}],
                "raw": raw + o["output"],
                "type": o["type"],
                **({"logprobs": o["logprobs"]} if "logprobs" in o else {}),
            }
            for o in outputs
        ]
        return {"outputs": results, "input": {"chat_template": messages, "raw": raw}}

    return await _answer(request, plan, shape)


class _Plan:
    """A checked steering request: the prompt, the steering hooks, and how to generate."""

    def __init__(self, served: Any, body: Any, prompt: prompts.Prompt, positions: Any) -> None:
        served.check_model(body.model)
        self.served, self.body, self.prompt = served, body, prompt
        if len(set(body.types)) != len(body.types):
            raise RequestError(
                400, f"types {body.types} names a type twice; give STEERED, DEFAULT or both, once each"
            )
        n = body.n_completion_tokens
        at_most("n_completion_tokens", n, served.limits.max_new_tokens, "--max-new-tokens")
        n_ctx = served.model.cfg.n_ctx
        if len(prompt.ids) + n > n_ctx:
            raise RequestError(
                400,
                f"a prompt of {len(prompt.ids)} tokens and n_completion_tokens={n} pass the model's context of {n_ctx}",
            )
        if body.freq_penalty != 0 and body.temperature == 0:
            raise RequestError(
                400,
                f"freq_penalty={body.freq_penalty} applies only when sampling; give temperature > 0, or freq_penalty 0",
            )
        if body.freq_penalty < 0:
            raise RequestError(400, f"freq_penalty={body.freq_penalty}; give 0 or more")
        if body.seed != int(body.seed):
            raise RequestError(400, f"seed={body.seed}; give a whole number")
        if (body.features is None) == (body.vectors is None):
            raise RequestError(400, "give features or vectors to steer with: exactly one of them")
        directions = self._features(body) if body.features is not None else self._vectors(body)
        if not directions and "STEERED" in body.types:
            raise RequestError(400, "nothing to steer with: the features (or vectors) list is empty")
        make = EDITS[body.steer_method]
        self.hooks = []
        for hook, vector, strength in directions:
            try:
                self.hooks.append((hook, make(vector, body.strength_multiplier * strength, positions)))
            except ValueError as err:
                raise RequestError(400, f"steering at {hook}: {err}") from None

    def _features(self, body: Any) -> list[tuple[str, torch.Tensor, float]]:
        out = []
        for feature in body.features:
            self.served.check_model(feature.model, "features.model")
            if feature.steering_vector is not None:
                raise RequestError(
                    422,
                    "a feature's steering_vector is its decoder row, read from the dictionary; leave it out, or "
                    "steer with vectors",
                )
            source = self.served.sources.get(feature.source)
            index = torch.tensor([source.check_index(feature.index)])
            dictionary = source.dictionary
            with torch.no_grad():
                rows = dictionary.decoder(source.layer, index)[0].float().cpu()  # [n_out, d_out]
            if self.body.normalize_steering:
                rows = rows / _norm(rows, f"feature {feature.index} of {source.name}")
            for row, out_layer in zip(rows, dictionary.output_layers(source.layer), strict=True):
                hook = dictionary.output_hook(out_layer)
                out.append((hook, self._shaped(hook, row), feature.strength))
        return out

    def _vectors(self, body: Any) -> list[tuple[str, torch.Tensor, float]]:
        out = []
        for vector in body.vectors:
            v = torch.tensor(vector.steering_vector, dtype=torch.float32)
            if not bool(torch.isfinite(v).all()):
                raise RequestError(400, f"the steering vector for {vector.hook} holds NaN or infinite values")
            if self.body.normalize_steering:
                v = v / _norm(v, f"the steering vector for {vector.hook}")
            out.append((vector.hook, self._shaped(vector.hook, v), vector.strength))
        return out

    def _shaped(self, hook: str, vector: torch.Tensor) -> torch.Tensor:
        model = self.served.model
        try:
            model.resolve(hook)
            shape = activation_shape(model.cfg, hook)
            if shape is not None and vector.numel() == torch.Size(shape).numel():
                vector = vector.reshape(shape)
            check_width(model, hook, vector)
        except (KeyError, ValueError) as err:
            message = err.args[0] if isinstance(err, KeyError) else str(err)
            raise RequestError(400, message) from None
        return vector.to(model.device)

    def generate(self, steered: bool, cancel: Cancel, on_text: Callable[[str], None]) -> Any:
        """One output: steered or not, greedy or sampled, stopping at the end-of-sequence token."""
        body = self.body
        sampling = (
            {
                "do_sample": True,
                "temperature": body.temperature,
                "seed": int(body.seed),
                "frequency_penalty": body.freq_penalty,
            }
            if body.temperature > 0
            else {}
        )
        return self.served.model.generate(
            self.prompt.ids,
            body.n_completion_tokens,
            fwd_hooks=[*(self.hooks if steered else []), *stopping_hooks(cancel)],
            stream=lambda row, text: on_text(text),
            return_logits=bool(body.n_logprobs),
            **sampling,
        )

    def logprobs(self, generation: Any) -> list[dict]:
        """Each generated token's log-probability and the ``n_logprobs`` likeliest tokens at its step."""
        tokenizer, n = self.served.model.tokenizer, self.body.n_logprobs
        out = []
        for step, token in enumerate(generation.new_tokens[0]):
            logp = torch.log_softmax(generation.logits[0, step].float(), dim=-1)
            values, ids = logp.topk(n)
            top = [
                {"token": tokenizer.decode([i]), "logprob": float(v)}
                for v, i in zip(values.tolist(), ids.tolist(), strict=True)
            ]
            out.append(
                {"token": tokenizer.decode([token]), "logprob": float(logp[token]), "top_logprobs": top}
            )
        return out


def _norm(vector: torch.Tensor, what: str) -> torch.Tensor:
    norm = vector.norm()
    if norm == 0:
        raise RequestError(400, f"{what} has norm 0, so it cannot be normalized (normalize_steering)")
    return norm


def _outputs(plan: _Plan, cancel: Cancel, emit: Callable[[list[dict]], None] | None) -> list[dict]:
    """Every requested output, in the order of ``types``; ``emit`` gets every output so far after each piece."""
    texts = {t: "" for t in plan.body.types}
    done: dict[str, list[dict]] = {}

    def current() -> list[dict]:
        return [
            {"type": t, "output": texts[t], **({"logprobs": done[t]} if t in done else {})}
            for t in plan.body.types
        ]

    for kind in plan.body.types:

        def on_text(piece: str, kind: str = kind) -> None:
            texts[kind] += piece
            if emit is not None:
                emit(current())

        generation = plan.generate(kind == "STEERED", cancel, on_text)
        texts[kind] = generation.text[0]
        if plan.body.n_logprobs:
            done[kind] = plan.logprobs(generation)
            if emit is not None:
                emit(current())
    return current()


async def _answer(request: Request, plan: _Plan, shape: Callable[[list[dict]], dict]) -> Any:
    if not plan.body.stream:
        return shape(await compute(request, lambda cancel: _outputs(plan, cancel, None)))
    engine, cancel = request.app.state.served.engine, Cancel()
    engine.check_room()  # refused now, with a status, rather than in a stream already begun

    async def frames() -> AsyncIterator[str]:
        async for outputs in engine.stream(lambda c, emit: _outputs(plan, c, emit), cancel):
            yield f"data: {json.dumps(shape(outputs))}\n\n"

    return StreamingResponse(frames(), media_type="text/event-stream")
