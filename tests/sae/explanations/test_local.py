"""The local backend: interp's own batched generation, the checkpoint's chat template, and the whole pipeline
on the packaged SmolLM2."""

from __future__ import annotations

import functools
import json
import math

import pytest
import torch

import interp
from interp.sae.explanations import (
    CachedBackend,
    ChatRequest,
    EmbeddingScorer,
    FeatureFiles,
    LocalBackend,
    ResponseCache,
    SentenceEmbedder,
    Settings,
    autointerp,
    chat_template_of,
    examples_of,
    read_rows,
)
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import tiny_llama
from tests.sae.explanations.planted import PLANTED, write_folder

REQUESTS = [
    ChatRequest((("system", "Be brief."), ("user", "The cat sat on the")), max_tokens=5, top_logprobs=3),
    ChatRequest((("user", "Numbers like 12345 and"),), max_tokens=5, top_logprobs=3),
    ChatRequest(
        (("user", "The animal didn't cross the street because it was too tired, and then"),), max_tokens=5
    ),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model = tiny_llama(300, num_hidden_layers=2)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)  # sharp next-token distributions: no near-ties for padding's rounding to flip
    folder = save_folder(model, byte_level_bpe(), tmp_path_factory.mktemp("tiny"))
    return folder, interp.load(folder)


def test_batched_answers_are_the_answers_alone(tiny):
    folder, model = tiny
    assert chat_template_of(folder) is None  # a base model: a plain transcript
    batched = LocalBackend(model, name="tiny", batch_size=3)
    alone = LocalBackend(model, name="tiny", batch_size=1)
    together, apart = batched.complete(REQUESTS), alone.complete(REQUESTS)
    assert [r.text for r in together] == [r.text for r in apart]
    for a, b in zip(together[:2], apart[:2], strict=True):  # left padding changes only float rounding
        assert [[t for t, _ in c.top] for c in a.tokens] == [[t for t, _ in c.top] for c in b.tokens]
        flat = [lp for c in a.tokens for _, lp in c.top]
        assert flat == pytest.approx([lp for c in b.tokens for _, lp in c.top], abs=1e-4)
    assert batched.render(REQUESTS[0]) == "System: Be brief.\n\nUser: The cat sat on the\n\nAssistant:"
    assert (batched.batches, alone.batches) == (2, 3)  # the settings differ for the third: a group of its own


def test_alternatives_are_the_likeliest_tokens_of_each_step(tiny):
    _, model = tiny
    backend = LocalBackend(model, name="tiny")
    reply = backend.complete(REQUESTS[:1])[0]
    ids = model.to_tokens(backend.render(REQUESTS[0]), prepend_bos=False).ids
    for choice in reply.tokens:
        with torch.no_grad():
            logprobs = torch.log_softmax(model(ids)[0, -1].float(), dim=-1)
        top = logprobs.topk(3)
        assert [t for t, _ in choice.top] == model.tokenizer.to_str_tokens(top.indices.tolist())
        # generation runs the KV-cached step, this a full forward: float32 rounding of logits of tens
        assert [lp for _, lp in choice.top] == pytest.approx(top.values.tolist(), abs=1e-4)
        assert choice.token == choice.top[0][0]  # greedy takes the likeliest
        ids = torch.cat([ids, top.indices[:1].view(1, 1)], dim=1)
    assert sum(math.exp(lp) for _, lp in reply.tokens[0].top) <= 1.0 + 1e-6


def test_sampling_is_seeded_by_the_request(tiny):
    _, model = tiny
    hot = [ChatRequest(r.messages, max_tokens=6, temperature=1.5) for r in REQUESTS]
    first = LocalBackend(model, name="tiny", batch_size=3).complete(hot)
    assert LocalBackend(model, name="tiny", batch_size=1).complete(hot[::-1]) == first[::-1]


@functools.cache
def smollm2():
    return interp.load("smollm2-135m")


@pytest.mark.slow
def test_the_chat_template_renders_as_transformers_renders_it():
    from tests.sae.explanations.server import hf_folder

    transformers = pytest.importorskip("transformers")
    template = chat_template_of("smollm2-135m")
    assert template == chat_template_of(hf_folder())
    backend = LocalBackend(smollm2(), name="smollm2-135m", chat_template=template)
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_folder())
    for request in REQUESTS:
        expected = tokenizer.apply_chat_template(
            request.as_openai(), tokenize=False, add_generation_prompt=True
        )
        assert backend.render(request) == expected


@pytest.mark.slow
def test_smollm2_explains_and_scores_a_planted_feature_end_to_end(tmp_path):
    """The packaged models through the whole pipeline: SmolLM2 explains and scores, MiniLM embeds. What a 135M
    model writes is not checked for sense (it rarely makes any); that each step ran and was recorded is."""
    folder = FeatureFiles.open(write_folder(tmp_path / "dash", features=PLANTED[:1], n_examples=16))
    local = LocalBackend(
        smollm2(), name="smollm2-135m", chat_template=chat_template_of("smollm2-135m"), batch_size=8
    )
    backend = CachedBackend(local, ResponseCache(tmp_path / "cache.jsonl"))
    settings = Settings(n_explain=4, n_test=4, per_prompt=4)
    embedding = EmbeddingScorer(SentenceEmbedder(interp.load("minilm-l6")))
    summary = autointerp(folder, backend, tmp_path / "out.jsonl", settings=settings, embedding=embedding)
    assert summary.written == 1 and backend.asked == 1 + 2 * 2  # an explanation, two prompts per classifier
    (row,) = read_rows(tmp_path / "out.jsonl").values()
    print(json.dumps({k: row[k] for k in ("explanation", "scores", "error") if k in row}, indent=1))
    assert row["explainer"]["model"] == "smollm2-135m" and row["explainer"]["answer"]
    assert set(row["scores"]) == {"detection", "fuzzing", "embedding"}
    # The embedding score is of the explanation the row records, on the examples held out from the explainer:
    # their similarities, and the AUC counted here over every (activating, non-activating) pair, ties half.
    _, test, negatives, _ = examples_of(folder.record(PLANTED[0].id), settings)
    vectors = embedding.embedder.encode([row["explanation"], *(e.text for e in [*test, *negatives])])
    similarity = (vectors[1:] @ vectors[0]).tolist()
    pos, neg = similarity[: len(test)], similarity[len(test) :]
    pairs = [(p > q) + 0.5 * (p == q) for p in pos for q in neg]
    scored = row["scores"]["embedding"]
    assert (scored["n_positive"], scored["n_negative"]) == (len(test), len(negatives)) == (4, 4)
    assert scored["auc"] == pytest.approx(sum(pairs) / len(pairs), abs=1e-12)
    for name in ("detection", "fuzzing"):  # every example judged or counted as failed
        metrics = row["scores"][name]
        assert metrics["n_positive"] + metrics["n_negative"] + metrics["n_failed"] == 2 * len(test)
    again = CachedBackend(local, ResponseCache(tmp_path / "cache.jsonl"))
    autointerp(folder, again, tmp_path / "out2.jsonl", settings=settings, embedding=embedding)
    assert (
        again.asked == 0
        and read_rows(tmp_path / "out2.jsonl")[PLANTED[0].id.index]["scores"] == row["scores"]
    )
