"""Every study's report, made on tiny models, read in Chromium at a laptop's width.

Each report must open without console errors, never scroll sideways, keep wide tables inside their own
scrolling box, and have no figure whose tick labels crowd (the writer marks any that remain after thinning).
Each run also says when its last long step (the figures) starts and ends. Screenshots go to
``test-artifacts/report_layout_NAME.png``.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

import pytest

from studies.data.load import load_items
from tests.studies.test_attribution_study import texts as attribution_texts
from tests.studies.test_circuits import ARGS as CIRCUITS_ARGS
from tests.studies.test_coreference_run import _texts as coreference_texts
from tests.studies.tiny_lm import tiny_llama_folder

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STUDIES = (
    "position",
    "scaling",
    "heads",
    "residual",
    "recurrence",
    "coreference",
    "circuits",
    "steering",
    "features",
    "attribution",
)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A tiny random Llama with a BPE trained on the shipped items, for the studies that need a model."""
    texts = [item.prompt + t for item in load_items("agreement") for t in item.targets] + coreference_texts()
    return tiny_llama_folder(tmp_path_factory.mktemp("tiny") / "model", texts, vocab_size=900)


def _smaller(monkeypatch, module: str, name: str, **fields) -> None:
    """Replace a study's config class with one whose defaults are the small ``fields``."""
    study = importlib.import_module(module)
    base = getattr(study, name)
    annotations = {key: type(value) for key, value in fields.items()}  # redeclared, so the defaults change
    small = dataclass(frozen=True)(type(name, (base,), {"__annotations__": annotations, **fields}))
    assert all(getattr(small(), key) == value for key, value in fields.items())
    monkeypatch.setattr(study, name, small)


def _argv(name: str, monkeypatch, folder) -> list[str]:
    if name == "heads":
        _smaller(monkeypatch, "studies.heads.study", "HeadsConfig", n_boot=100)
    if name == "residual":
        _smaller(monkeypatch, "studies.residual.study", "ResidualConfig", depths=(6, 12), seeds=1, d_model=16,
                 seq_len=8, batch=2)  # fmt: skip
    if name == "recurrence":
        _smaller(monkeypatch, "studies.recurrence.study", "RecurrenceConfig", timing_lengths=(8, 16),
                 timing_repeats=1, n_eval=64)  # fmt: skip
    if name == "attribution":  # its targets (" she", " he", " animal", " street") must be single tokens
        folder = tiny_llama_folder(folder.parent / "attribution-model", attribution_texts())
    if name in ("features", "attribution"):
        corpus = folder.parent / "corpus.txt"
        corpus.write_text("\n".join(coreference_texts()[:60]) + "\n")
    return {
        "features": [
            "--model",
            str(folder),
            "--data",
            str(folder.parent / "corpus.txt"),
            "--layers",
            "0,1",
            "--texts",
            "40",
            "--context",
            "16",
            "--d-sae",
            "32",
            "--k",
            "4",
            "--epochs",
            "1",
            "--train-batch-size",
            "64",
            "--pairs",
            "4",
            "--top",
            "2",
            "--random-draws",
            "2",
        ],  # fmt: skip
        "attribution": [
            "--model",
            str(folder),
            "--data",
            str(folder.parent / "corpus.txt"),
            "--texts",
            "40",
            "--context",
            "16",
            "--d-transcoder",
            "32",
            "--k",
            "4",
            "--epochs",
            "1",
            "--pairs",
            "2",
            "--max-feature-nodes",
            "24",
            "--top",
            "2",
            "--random-draws",
            "2",
            "--heads",
            "L1H0",
            "--work",
            str(folder.parent / "attribution-work"),
        ],  # fmt: skip
        "position": ["--models", ""],
        "scaling": ["--models", "", "--n-queries", "100"],
        "heads": ["--models", ""],
        "residual": ["--model", ""],
        "recurrence": ["--steps", "10", "--distances", "4"],
        "coreference": [
            "--model",
            str(folder),
            "--data",
            "winograd",
            "--limit",
            "8",
            "--patch-pairs",
            "1",
            "--top-k",
            "1",
            "--probes",
            "final",
            "--batch-size",
            "8",
        ],  # fmt: skip
        "circuits": ["--model", str(folder), *(a for a in CIRCUITS_ARGS if a != "--quiet")],
        "steering": [
            "--model",
            str(folder),
            "--layers",
            "0,1",
            "--focus",
            "1",
            "--scales",
            "1,2",
            "--new-tokens",
            "2",
            "--continuations",
            "1",
        ],  # fmt: skip
    }[name]


@pytest.mark.parametrize("name", STUDIES)
def test_the_report_reads_at_laptop_width(name, tmp_path, tiny_folder, monkeypatch, browser, capsys):
    main = importlib.import_module(f"studies.{name}.study").main
    out = tmp_path / name
    assert main([*_argv(name, monkeypatch, tiny_folder), "--out", str(out)]) == 0
    said = capsys.readouterr().err  # the last long step, drawing the figures, says when it starts and ends
    assert f"interp study {name}: figures and the report ..." in said
    assert re.search(rf"interp study {name}: figures and the report: done in [0-9.]+ s", said)
    browser.open_file(out / "index.html")
    assert browser.console_errors() == []
    problems = browser.layout_problems()
    browser.screenshot(f"report_layout_{name}")
    assert problems == [], problems
