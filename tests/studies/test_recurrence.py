"""The recurrence study on tiny settings: task, gradients, short-distance learning, timing structure."""

from __future__ import annotations

import pytest
import torch

from studies.recurrence.config import RecurrenceConfig
from studies.recurrence.models import LSTMModel, logits_of, make_transformer
from studies.recurrence.task import make_batch
from studies.recurrence.timing import timing
from studies.recurrence.training import embedding_gradients, run_distance


@pytest.fixture(scope="module")
def cfg():
    return RecurrenceConfig(
        distances=(4, 64), steps=200, batch=32, n_eval=256, timing_lengths=(8, 32), timing_repeats=1
    )


def test_batch_layout(cfg):
    tokens, target = make_batch(cfg, 5, 3, torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 7)
    torch.testing.assert_close(tokens[:, 0], target)
    assert bool((tokens[:, 1:-1] >= cfg.n_symbols).all()) and bool((tokens[:, -1] == cfg.d_vocab - 1).all())


def test_gradient_to_distant_input_vanishes_for_the_lstm_only(cfg):
    torch.manual_seed(0)
    lstm = embedding_gradients(LSTMModel(cfg), cfg, 64, seed=0)
    tf = embedding_gradients(make_transformer(cfg, 66, 0), cfg, 64, seed=0)
    assert lstm["ratio"] < 1e-10
    assert tf["ratio"] > 1e-5
    assert tf["ratio"] / lstm["ratio"] > 1e5


def test_transformer_hook_gradient_matches_direct_gradient(cfg):
    model = make_transformer(cfg, 8, 0).double()
    tokens, target = make_batch(cfg, 6, 4, torch.Generator().manual_seed(1))
    captured = []

    def keep(x):
        x.retain_grad()
        captured.append(x)

    loss = torch.nn.functional.cross_entropy(logits_of(model, tokens, cfg.n_symbols, keep), target)
    loss.backward()
    grad_we = model.embed.W_E.grad
    expected = torch.zeros_like(grad_we).index_add_(0, tokens.flatten(), captured[0].grad.flatten(0, 1))
    torch.testing.assert_close(grad_we, expected)


def test_transformer_solves_short_distance(cfg):
    rows = {r["model"]: r for r in run_distance(cfg, 4, seed=0)}
    assert rows["transformer"]["accuracy"] > 0.9
    assert rows["lstm"]["path_length"] == 5 and rows["transformer"]["path_length"] == 1


def test_timing_table_structure(cfg):
    times = timing(cfg, seed=0)
    assert len(times) == 3 * len(cfg.timing_lengths)
    assert (times.ms > 0).all()
    loop = times[times.method == "LSTM cell loop"]
    assert loop.sequential_steps.tolist() == list(cfg.timing_lengths)
    assert (times[times.method == "transformer, one pass"].sequential_steps == 1).all()
