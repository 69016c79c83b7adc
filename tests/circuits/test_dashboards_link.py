"""``interp attribute --dashboards DIR`` links only the dashboards of its own model and transcoders: those of
another dictionary or another model are refused in one line before attribution, and nothing is written."""

from __future__ import annotations

import importlib
import json

import pytest
import torch

import interp
from interp.cli import main
from interp.sae import load_transcoders
from interp.sae.dashboards import write_dashboards
from tests.circuits import test_cli_attribute
from tests.circuits.test_cli_attribute import LLAMA, PROMPT
from tests.circuits.transcoders import tiny_transcoders
from tests.sae.dashboards import helpers

tc_folder = test_cli_attribute.tc_folder  # the module's fixture, shared
FEATURES = importlib.import_module("interp.circuits.features")


def test_dashboards_of_another_dictionary_or_model_are_refused(tmp_path, tc_folder, capsys, monkeypatch):
    model = interp.load(str(LLAMA))
    tc = load_transcoders(tc_folder, model=model)
    texts = helpers.texts(12)
    other_model = interp.load(str(LLAMA))
    with torch.no_grad():
        next(other_model.parameters()).mul_(1.01)  # the same architecture, other weights
    made = {
        "dictionary": (model, tiny_transcoders(model.cfg, d_transcoder=16, seed=8)),  # same shape, other rows
        "model": (other_model, tc),
        "right": (model, tc),
    }
    for name, (m, dictionary) in made.items():
        write_dashboards(m, dictionary, tmp_path / name, texts, scan="tc")
    monkeypatch.setattr(
        FEATURES, "attribute", lambda *a, **k: pytest.fail("attribution ran before the check")
    )
    out = tmp_path / "graph"
    base = ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT, "--out", str(out),
            "--max-logits", "2", "--quiet"]  # fmt: skip
    for what in ("dictionary", "model"):
        assert main([*base, "--dashboards", str(tmp_path / what)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert (
            f"--dashboards {tmp_path / what / 'features' / 'tc'} shows the features of another {what}: "
            in err
        )
        assert f"pass the dashboards of this {what}, or write them: interp dashboards" in err
        assert not out.exists()
    monkeypatch.undo()
    assert main([*base, "--dashboards", str(tmp_path / "right")]) == 0
    assert json.loads((out / "graph.json").read_text())["metadata"]["scan"] == "./data/features/tc"
    assert (out / "features" / "tc").resolve() == (tmp_path / "right" / "features" / "tc").resolve()
