"""The position study's key numbers on small random models."""

from __future__ import annotations

import json

import pytest
import torch

from interp import load
from interp.study import find_model
from studies.position.config import PositionConfig
from studies.position.random_models import equivariance_error, random_model, random_models_table
from studies.position.study import main
from studies.position.trained import (
    SENTENCES,
    remove_positions_hooks,
    sentence_labels,
    shuffle_change,
    shuffle_positions,
)


@pytest.fixture(scope="module")
def table():
    cfg = PositionConfig(n_sequences=16, probe_sequences=128, models=())
    return random_models_table(cfg, seed=0).set_index(["positional", "causal"])


def test_no_positions_no_mask_is_equivariant(table):
    row = table.loc[("none", False)]
    assert row.max_abs_error < 1e-5
    assert row.relative_error < 1e-5
    assert abs(row.position_probe_r2) < 0.1


@pytest.mark.parametrize(
    "setting",
    [("learned", False), ("sinusoidal", False), ("rotary", False), ("none", True), ("learned", True)],
)
def test_positions_or_mask_break_equivariance(table, setting):
    free = table.loc[("none", False)].max_abs_error
    assert table.loc[setting].max_abs_error > 1e3 * free
    assert table.loc[setting].max_abs_error > 1e-3


def test_order_is_decodable(table):
    assert table.loc[("sinusoidal", False)].position_probe_r2 > 0.99
    assert table.loc[("learned", False)].position_probe_r2 > 0.5
    assert table.loc[("none", True)].position_probe_r2 > 0.15  # leaks through the mask


def test_equivariance_error_is_zero_for_identity():
    cfg = PositionConfig()
    model = random_model(cfg, "learned", True, seed=1)
    tokens = torch.randint(0, cfg.d_vocab, (2, 8))
    perms = torch.arange(8).expand(2, 8)
    assert equivariance_error(model, tokens, perms)["max_abs_error"] == 0.0


def test_shuffle_keeps_special_tokens():
    special = torch.tensor([True, False, False, False, False, True])
    perm = shuffle_positions(special, torch.Generator().manual_seed(0))
    assert perm[0] == 0 and perm[-1] == 5
    assert sorted(perm.tolist()) == list(range(6))


def test_report_without_models(tmp_path):
    out = tmp_path / "position"
    assert main(["--out", str(out), "--models", "", "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    rows = {(r["positional"], r["causal"]): r for r in results["results"]["random_models"]}
    assert rows[("none", False)]["max_abs_error"] < 1e-5


@pytest.mark.slow
def test_minilm_without_positions_is_equivariant():
    try:
        find_model("minilm-l6")
    except FileNotFoundError as err:
        pytest.skip(str(err))
    model = load("minilm-l6")
    hooks = remove_positions_hooks(model)
    texts = SENTENCES[:2]
    as_is = shuffle_change(model, texts, n_shuffles=1, seed=0)
    removed = shuffle_change(model, texts, n_shuffles=1, seed=0, fwd_hooks=hooks)
    assert removed.max() < 1e-9
    assert as_is[-1].mean() > 0.05
    # the intervals resample sentences: each column's sentence, counted by a plain loop over the tokens
    expected = [
        i
        for i, text in enumerate(texts)
        for _ in range(sum(not s for s in model.tokenizer.to_tokens(text).special[0].tolist()))
    ]
    assert sentence_labels(model, texts, 1).tolist() == expected and len(expected) == as_is.shape[1]
    assert sentence_labels(model, texts, 3).tolist() == [i for i in expected for _ in range(3)]
