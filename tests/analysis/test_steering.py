"""Steering vectors: the mean difference they claim to be, the hook that adds them, files that know their
model, and sweeps that equal one naive forward per prompt and condition."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from interp.analysis import (
    Batch,
    SteeringVector,
    load_steering_vector,
    logit_difference,
    steer,
    steering_sweep,
    steering_vector,
    steering_vectors,
)
from tests.generation_models import tiny_lm

POSITIVE = ["The cat sat on the mat", "Numbers like 12345", "The dog"]
NEGATIVE = ["The dog sat on the rug", "tabs and new lines", "The animal didn't cross"]
HOOK = "blocks.1.hook_resid_pre"


@pytest.fixture(scope="module")
def model():
    return tiny_lm()


def _naive(model, prompts, hook, position):
    out = []
    for text in prompts:
        _, cache = model.run_with_cache(text, names_filter=hook)
        act = cache[hook][0]  # [pos, ...]
        out.append(act.mean(0) if position == "mean" else act[-1 if position == "last" else position])
    return torch.stack(out)


@pytest.mark.parametrize("position", ["last", "mean", 1, -2])
@pytest.mark.parametrize("hook", [HOOK, "blocks.0.attn.hook_z", "blocks.1.mlp.hook_post"])
def test_a_steering_vector_is_the_mean_paired_difference(model, position, hook):
    vec = steering_vector(model, POSITIVE, NEGATIVE, hook, position, batch_size=2)
    expected = (_naive(model, POSITIVE, hook, position) - _naive(model, NEGATIVE, hook, position)).mean(0)
    torch.testing.assert_close(vec.vector, expected, atol=1e-5, rtol=1e-5)
    assert vec.hook_name == hook and vec.n_pairs == 3 and vec.position == position


def test_steering_vectors_at_many_hooks_equal_one_at_a_time(model):
    many = steering_vectors(model, POSITIVE, NEGATIVE, "blocks.*.hook_resid_post")
    assert list(many) == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    for name, vec in many.items():
        torch.testing.assert_close(vec.vector, steering_vector(model, POSITIVE, NEGATIVE, name).vector)


def test_bad_steering_vector_requests(model):
    with pytest.raises(ValueError, match="3 positive and 2 negative prompts"):
        steering_vector(model, POSITIVE, NEGATIVE[:2], HOOK)
    with pytest.raises(ValueError, match=r"position 4 is outside prompt 2 \(\d tokens\): 'The dog'"):
        steering_vector(model, POSITIVE, NEGATIVE, HOOK, 4)
    with pytest.raises(ValueError, match="position='first'; expected 'last', 'mean' or a token index"):
        steering_vector(model, POSITIVE, NEGATIVE, HOOK, "first")
    with pytest.raises(ValueError, match=r"is \[batch, head, query, key\], not \[batch, pos, ...\]"):
        steering_vector(model, POSITIVE, NEGATIVE, "blocks.0.attn.hook_pattern")
    with pytest.raises(KeyError, match="did you mean 'blocks.1.hook_resid_pre'"):
        steering_vector(model, POSITIVE, NEGATIVE, "blocks.1.hook_resid_pr")


def test_steer_adds_the_vector_where_asked(model):
    ids, _ = model.to_tokens(POSITIVE[0])
    vector = torch.randn(model.cfg.d_model)
    _, plain = model.run_with_cache(ids, names_filter=HOOK)
    for positions, where in (("all", slice(None)), ([1, -1], [1, ids.shape[1] - 1]), (2, [2])):
        _, cache = model.run_with_cache(
            ids, names_filter=HOOK, fwd_hooks=[(HOOK, steer(vector, 2.5, positions))]
        )
        expected = plain[HOOK].clone()
        expected[:, where] += 2.5 * vector
        torch.testing.assert_close(cache[HOOK], expected)
    with pytest.raises(ValueError, match="positions='new' steers generated tokens, so it acts only inside"):
        model.run_with_hooks(ids, fwd_hooks=[(HOOK, steer(vector, positions="new"))])
    with pytest.raises(ValueError, match=r"steering position 40 is outside this input of \d+ positions"):
        model.run_with_hooks(ids, fwd_hooks=[(HOOK, steer(vector, positions=[40]))])
    with pytest.raises(ValueError, match=r"shape \[7\] does not fit 'blocks.1.hook_resid_pre'"):
        model.run_with_hooks(ids, fwd_hooks=[(HOOK, steer(torch.randn(7)))])
    with pytest.raises(ValueError, match="positions=\\['first'\\]"):
        steer(vector, positions=["first"])


def test_vectors_save_and_load_with_their_hook_and_model(model, tmp_path):
    vec = steering_vector(model, POSITIVE, NEGATIVE, HOOK)
    path = tmp_path / "she.safetensors"
    vec.save(path)
    back = load_steering_vector(path, model)
    torch.testing.assert_close(back.vector, vec.vector, atol=0, rtol=0)
    assert (back.hook_name, back.position, back.n_pairs) == (HOOK, "last", 3)
    assert back.model["name"] == model.cfg.name and back.model["d_model"] == model.cfg.d_model
    half = tiny_lm().to(torch.bfloat16)  # the same weights in another dtype are the same model
    SteeringVector.load(path, half)


def test_vectors_for_another_model_are_refused(model, tmp_path):
    path = tmp_path / "she.safetensors"
    steering_vector(model, POSITIVE, NEGATIVE, HOOK).save(path)
    with pytest.raises(ValueError, match="whose embedding weights differ from this model's"):
        load_steering_vector(path, tiny_lm(seed=1))
    with pytest.raises(ValueError, match="it was made on .*48.*, not on this model, .*d_model 64"):
        load_steering_vector(path, tiny_lm(d_model=64))
    other = tiny_lm(seed=1)
    with pytest.raises(ValueError, match="whose embedding weights differ"):
        other.generate("The cat", 3, fwd_hooks=[load_steering_vector(path).hook(2.0)])
    save_file({"vector": torch.zeros(3)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="is not a steering vector file"):
        load_steering_vector(tmp_path / "plain.safetensors")


@torch.no_grad()
def _naive_sweep(model, prompts, vectors, scales, metric, positions):
    rows = []
    for p, text in enumerate(prompts):
        ids, _ = model.to_tokens(text)
        base = model(ids)[:, -1]
        rows.append(
            ("none", 0.0, p, float(metric(base, Batch(ids, labels={"prompt": torch.tensor([p])}))[0]))
        )
        for label, vec in vectors.items():
            for scale in scales:
                where = [-1] if positions == "last" else positions
                logits = model.run_with_hooks(ids, fwd_hooks=[vec.hook(scale, where)])[:, -1]
                rows.append(
                    (
                        label,
                        float(scale),
                        p,
                        float(metric(logits, Batch(ids, labels={"prompt": torch.tensor([p])}))[0]),
                    )
                )
    return sorted(rows)


@pytest.mark.parametrize("positions", ["last", "all", [0, -1]])
def test_a_sweep_equals_one_naive_forward_per_prompt_and_condition(model, positions):
    vectors = steering_vectors(model, POSITIVE, NEGATIVE, ["blocks.0.hook_resid_post", HOOK])
    labelled = {"first": vectors["blocks.0.hook_resid_post"], "second": vectors[HOOK]}
    prompts = [*POSITIVE, *NEGATIVE, "x"]  # one-token prompts too

    def metric(logits, batch):
        return logits[:, 5] - logits[:, 7] + batch.labels["prompt"].float()

    frame = steering_sweep(
        model, prompts, labelled, [-2.0, 1.0, 3.0], metric, positions=positions, batch_size=10
    )
    assert list(frame.columns) == ["vector", "hook", "scale", "prompt", "value"]
    got = sorted(zip(frame.vector, frame.scale, frame.prompt, frame.value, strict=True))
    expected = _naive_sweep(model, prompts, labelled, [-2.0, 1.0, 3.0], metric, positions)
    assert [g[:3] for g in got] == [e[:3] for e in expected]
    values = torch.tensor([g[3] for g in got])
    torch.testing.assert_close(values, torch.tensor([e[3] for e in expected]), atol=1e-4, rtol=0)


def test_a_sweep_reads_per_prompt_labels_with_the_ready_made_logit_difference(model):
    vector = steering_vector(model, POSITIVE, NEGATIVE, HOOK)
    prompts = [*POSITIVE, "x"]

    def by_hand(logits, batch):
        return logits[:, 5] - logits[:, 7]

    labels = {"answer": torch.full((len(prompts),), 5), "foil": torch.full((len(prompts),), 7)}
    mine = steering_sweep(model, prompts, vector, [1.0, 2.0], by_hand, batch_size=3)
    ready = steering_sweep(model, prompts, vector, [1.0, 2.0], logit_difference, labels=labels, batch_size=3)
    torch.testing.assert_close(torch.tensor(ready.value.to_numpy()), torch.tensor(mine.value.to_numpy()))
    with pytest.raises(ValueError, match="label 'answer' has shape \\[2\\]; give one entry per prompt"):
        steering_sweep(model, prompts, vector, [1.0], logit_difference, labels={"answer": torch.ones(2)})
    with pytest.raises(TypeError, match="cannot be called as metric\\(logits, batch\\)"):
        steering_sweep(model, prompts, vector, [1.0], lambda logits: logits[:, 5])
