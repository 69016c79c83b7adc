"""Neuronpedia's graph-server API: ``POST /generate-graph`` and ``POST /steer``, on the server's transcoders.

``/generate-graph`` traces the prompt's attribution graph (:func:`~interp.circuits.features.attribute`, one
cancellation check after each backward pass) and answers with the pruned graph document interp writes as
``{slug}.json`` (:func:`~interp.circuits.features.neuronpedia.graph_json`): the file ``interp attribute``
writes for the same prompt and settings, node for node as circuit-tracer writes it. Fields that only concern
Neuronpedia's uploads (``signed_url``, ``user_id``, ``compress``) and its QK tracing are refused.

``/steer`` generates from the prompt twice, as is and with features set at positions of the prompt or at every
generated position (:func:`~interp.circuits.features.generate_with_features`): ``ablate`` sets a feature to 0,
``delta`` to its activation at ``token_active_position`` plus ``delta``, and ``freeze_attention`` holds the
prompt's attention patterns at their unedited values. Positions are the graph's (the prompt with a special
token first). It answers ``DEFAULT_GENERATION`` and ``STEERED_GENERATION`` (the whole text, prompt included)
and, for each token of each, the ``top_k`` likeliest next tokens (``top_logits``; empty before the prompt's
last token). Each generation runs one step past ``n_tokens`` so the last token's next-token distribution is
known; its text stops at ``n_tokens``.
"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from interp.analysis.feature_activations import feature_activations
from interp.circuits.features import FeatureEdit, attribute, generate_with_features
from interp.circuits.features.inputs import prompt_ids
from interp.circuits.features.neuronpedia import graph_json
from interp.serve.errors import RequestError, at_most
from interp.serve.prompts import bounded
from interp.serve.work import compute, stopping_hooks

router = APIRouter()


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ChatMessage(_Request):
    role: str
    content: str


class GraphGenerationRequest(_Request):
    prompt: str = ""
    messages: list[ChatMessage] | None = None
    model_id: str
    batch_size: int = 48
    max_n_logits: int = 10
    desired_logit_prob: float = 0.95
    node_threshold: float = 0.8
    edge_threshold: float = 0.98
    slug_identifier: str
    max_feature_nodes: int = 10_000
    signed_url: str | None = None
    user_id: str | None = None
    compress: bool = False
    enable_qk_tracing: bool = False
    qk_top_fraction: float = 0.6
    qk_topk: int = 10


class SteerFeature(_Request):
    layer: int
    index: int
    token_active_position: int
    steer_position: int | None = None
    steer_generated_tokens: bool = False
    delta: float | None = None
    ablate: bool = False


class SteerRequest(_Request):
    model_id: str
    prompt: str = ""
    messages: list[ChatMessage] | None = None
    features: list[SteerFeature]
    n_tokens: int = 10
    top_k: int = 5
    temperature: float = 0.0
    freq_penalty: float = 0
    seed: int | None = None
    freeze_attention: bool = False


@router.post("/generate-graph")
async def generate_graph(body: GraphGenerationRequest, request: Request) -> dict:
    served = request.app.state.served
    served.check_model(body.model_id, "model_id")
    transcoders = served.graph_transcoders()
    _refuse_unsupported(body)
    limits = served.limits
    for name in ("batch_size", "max_n_logits", "max_feature_nodes"):
        if getattr(body, name) < 1:
            raise RequestError(400, f"{name}={getattr(body, name)}; give 1 or more")
    at_most("batch_size", body.batch_size, limits.max_graph_batch, "--max-graph-batch")
    at_most("max_feature_nodes", body.max_feature_nodes, limits.max_feature_nodes, "--max-feature-nodes")
    at_most("max_n_logits", body.max_n_logits, served.model.cfg.d_vocab)
    for name in ("desired_logit_prob", "node_threshold", "edge_threshold"):
        if not 0 <= getattr(body, name) <= 1:
            raise RequestError(400, f"{name}={getattr(body, name)}; give a number from 0 to 1")
    from interp.sae.dashboards.folder import check_scan

    try:
        check_scan(body.slug_identifier, "slug_identifier")
    except ValueError as err:
        raise RequestError(400, str(err)) from None
    if not body.prompt.strip():
        raise RequestError(400, 'the prompt is empty; give the text to trace, such as "The cat sat on the"')
    model = served.model
    bounded(served, len(prompt_ids(model, body.prompt)), served.limits.max_graph_tokens)

    def trace(cancel: Any) -> dict:
        graph = attribute(
            model,
            transcoders,
            body.prompt,
            max_logits=body.max_n_logits,
            logit_probability=body.desired_logit_prob,
            max_feature_nodes=body.max_feature_nodes,
            batch_size=body.batch_size,
            progress=cancel.check,
        )
        graph.metadata.update(model=served.model_id, transcoders=served.transcoders_name)
        return graph_json(
            graph,
            node_threshold=body.node_threshold,
            edge_threshold=body.edge_threshold,
            slug=body.slug_identifier,
            prompt_tokens=model.tokenizer.to_str_tokens(graph.input_tokens.tolist()),
            vocab=model.cfg.d_vocab,
        )

    return await compute(request, trace)


@router.post("/steer")
async def steer_graph(body: SteerRequest, request: Request) -> dict:
    served = request.app.state.served
    served.check_model(body.model_id, "model_id")
    transcoders = served.graph_transcoders()
    if body.messages is not None:
        raise RequestError(
            422, "messages (a chat to render) is not taken here; render it and send it as prompt"
        )
    model = served.model
    ids = prompt_ids(model, body.prompt)
    bounded(served, len(ids))
    n = body.n_tokens
    if n < 1:
        raise RequestError(400, f"n_tokens={n}; give 1 or more")
    at_most("n_tokens", n, served.limits.max_new_tokens, "--max-new-tokens")
    if len(ids) + n + 1 > model.cfg.n_ctx:
        raise RequestError(
            400,
            f"a prompt of {len(ids)} tokens and n_tokens={n} pass the model's context of {model.cfg.n_ctx}",
        )
    if body.top_k < 1:
        raise RequestError(400, f"top_k={body.top_k}; give 1 or more")
    at_most("top_k", body.top_k, served.limits.max_top_k, "--max-top-k")
    if body.temperature < 0:
        raise RequestError(400, f"temperature={body.temperature}; give 0 (greedy) or more")
    if body.freq_penalty != 0 and body.temperature == 0:
        raise RequestError(
            400, f"freq_penalty={body.freq_penalty} applies only when sampling; give temperature > 0"
        )
    if body.freq_penalty < 0:
        raise RequestError(400, f"freq_penalty={body.freq_penalty}; give 0 or more")
    if body.seed is not None and body.temperature == 0:
        raise RequestError(400, "seed applies only when sampling; give temperature > 0, or leave seed out")
    for i, f in enumerate(body.features):
        _check_feature(i, f, transcoders, ids, model.tokenizer)
    sampling = (
        {
            "do_sample": True,
            "temperature": body.temperature,
            "seed": body.seed,
            "frequency_penalty": body.freq_penalty,
        }
        if body.temperature > 0
        else {}
    )

    def run(cancel: Any) -> dict:
        layers = sorted({f.layer for f in body.features})
        clean = feature_activations(model, transcoders, ids, layers) if layers else {}
        edits = [
            FeatureEdit(
                f.layer,
                f.index,
                None if f.steer_generated_tokens else f.steer_position,
                value=0.0 if f.ablate else float(clean[f.layer][f.token_active_position, f.index]) + f.delta,
                generated=f.steer_generated_tokens,
            )
            for f in body.features
        ]
        with model.hooks(stopping_hooks(cancel)):
            default = model.generate(ids, n + 1, return_logits=True, **sampling)
            steered = generate_with_features(
                model,
                transcoders,
                ids,
                edits,
                n + 1,
                hold_attention=body.freeze_attention,
                return_logits=True,
                **sampling,
            )
        default_text, default_logits = _by_token(model, ids, default, n, body.top_k)
        steered_text, steered_logits = _by_token(model, ids, steered, n, body.top_k)
        return {
            "DEFAULT_GENERATION": default_text,
            "STEERED_GENERATION": steered_text,
            "DEFAULT_LOGITS_BY_TOKEN": default_logits,
            "STEERED_LOGITS_BY_TOKEN": steered_logits,
        }

    return await compute(request, run)


def _refuse_unsupported(body: GraphGenerationRequest) -> None:
    if body.messages is not None:
        raise RequestError(
            422, "messages (a chat to render) is not taken here; render it and send it as prompt"
        )
    for name in ("signed_url", "user_id"):
        if getattr(body, name) is not None:
            raise RequestError(
                422,
                f"{name} concerns uploading the graph, which interp serve does not do: it answers with it",
            )
    if body.compress:
        raise RequestError(
            422, "compress concerns uploading the graph, which interp serve does not do: leave it false"
        )
    if body.enable_qk_tracing or body.qk_top_fraction != 0.6 or body.qk_topk != 10:
        raise RequestError(
            422,
            "QK tracing (enable_qk_tracing, qk_top_fraction, qk_topk) is not done here; interp explains attention "
            "in graph nodes with interp attribute --explain-attention",
        )


def _check_feature(i: int, f: SteerFeature, transcoders: Any, ids: torch.Tensor, tokenizer: Any) -> None:
    where = f"features[{i}]"
    if f.ablate == (f.delta is not None):
        raise RequestError(400, f"{where}: give ablate true or a delta, exactly one")
    if f.steer_generated_tokens == (f.steer_position is not None):
        raise RequestError(400, f"{where}: give steer_position or steer_generated_tokens true, exactly one")
    if f.layer not in transcoders.layers:
        raise RequestError(
            400, f"{where}: layer {f.layer} has no transcoder; the layers are 0 to {max(transcoders.layers)}"
        )
    if not 0 <= f.index < transcoders.n_features(f.layer):
        raise RequestError(
            400,
            f"{where}: feature {f.index} is out of range; layer {f.layer} has {transcoders.n_features(f.layer)}",
        )
    for name in ("token_active_position", "steer_position"):
        p = getattr(f, name)
        if p is not None and not 0 <= p < len(ids):
            raise RequestError(
                400, f"{where}: {name}={p} is outside the prompt of {len(ids)} tokens (0 to {len(ids) - 1})"
            )
    bos = tokenizer.bos_id if tokenizer is not None else None
    if f.steer_position is not None and bos is not None and int(ids[f.steer_position]) == bos:
        raise RequestError(
            400, f"{where}: position {f.steer_position} is the BOS token, which is not steered"
        )


def _by_token(model: Any, ids: torch.Tensor, generation: Any, n: int, k: int) -> tuple[str, list[dict]]:
    """The text (prompt and at most ``n`` new tokens) and, per token, the ``k`` likeliest next tokens."""
    tokenizer = model.tokenizer
    sequence = ids.tolist() + generation.new_tokens[0][:n]
    texts = tokenizer.to_str_tokens(sequence)
    first = len(ids) - 1  # the last prompt token: the first whose next token was generated
    by_token = []
    for i, text in enumerate(texts):
        step = i - first
        if step < 0:
            by_token.append({"token": text, "top_logits": []})
            continue
        probs = generation.logits[0, step].float().softmax(-1)
        values, tokens = probs.topk(k)
        top = [
            {"token": tokenizer.decode([t]), "prob": float(v)}
            for v, t in zip(values.tolist(), tokens.tolist(), strict=True)
        ]
        by_token.append({"token": text, "top_logits": top})
    return "".join(texts), by_token
