"""``interp autointerp``: its pre-flight, and a whole run with a model interp loads.

The explainer here is a tiny random Llama: it writes noise, which is the point. Its "explanations" are read as
such, the scorers cannot read its answers, and each feature's row says so in one line while the run goes on.
"""

from __future__ import annotations

import json

import pytest
import torch

from interp.cli import main
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import tiny_llama
from tests.sae.explanations.planted import PLANTED, write_folder


@pytest.fixture(scope="module")
def explainer(tmp_path_factory):
    model = tiny_llama(300, num_hidden_layers=2, max_position_embeddings=4096)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    return save_folder(model, byte_level_bpe(), tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def dashboards(tmp_path):
    return write_folder(tmp_path / "dash", features=PLANTED[:2], n_examples=16)


def command(dashboards, explainer, *more):
    return ["autointerp", str(dashboards), "--explainer", str(explainer), "--scorer", "detection,fuzzing",
            "--n-explain", "3", "--n-test", "2", "--per-prompt", "2", "--quiet", *more]  # fmt: skip


def test_a_run_writes_one_row_per_feature_and_a_rerun_asks_nothing(dashboards, explainer, capsys):
    assert main(command(dashboards, explainer)) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in (dashboards / "explanations.jsonl").read_text().splitlines()]
    assert [r["feature"] for r in rows] == ["0:5", "1:2"]
    for row in rows:
        assert row["explainer"]["model"] == str(explainer) and row["explainer"]["answer"] is not None
        assert set(row.get("scores", {})) <= {"detection", "fuzzing"}
    failed = [r for r in rows if r.get("error")]
    assert err.splitlines() == [f"interp: feature {r['feature']}: {r['error']}" for r in failed]
    assert out.rstrip().endswith(f"requests sent to {explainer}")
    cache = (dashboards / "explanations-cache.jsonl").read_text().splitlines()
    assert main(command(dashboards, explainer)) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"0 requests sent to {explainer}")
    assert (dashboards / "explanations-cache.jsonl").read_text().splitlines() == cache


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ["--scorer", "detection,bogus"],
            "argument --scorer: invalid value 'detection,bogus': 'bogus' is not a scorer; choose from detection, "
            "fuzzing, embedding (comma separated)",
        ),
        (["--scorer", ","], "argument --scorer: invalid value ',': no scorer named; choose from detection"),
        (["--features", "0:5,7:7"], "--features 7:7: not in "),
        (
            ["--features", "0-5"],
            "argument --features: invalid value '0-5': feature '0-5' is not LAYER:FEATURE; write it as 3:17",
        ),
        (
            ["--features", ","],
            "argument --features: invalid value ',': no feature named; write LAYER:FEATURE",
        ),
        (
            ["--explainer-model", "m"],
            "--explainer-model m names a model served at a URL, but --explainer {explainer} is not one; give "
            "--explainer a URL (http://...), or leave --explainer-model out",
        ),
        (["--n-test", "0"], "argument --n-test: 0; it must be at least 1"),
        (["--min-context", "40"], "--min-context 40 is more than --context 32; give at most 32"),
        (["--retries", "-2"], "argument --retries: -2 is negative; give 0 or more"),
        (["--timeout", "inf"], "argument --timeout: inf; give a finite number above 0"),
        (["--scan", "nope"], "--scan 'nope' is not in "),
        (
            ["--scorer", "embedding", "--embedding-model", "no-such-encoder"],
            "--embedding-model: no model 'no-such-encoder': it is not a ",
        ),
    ],
)
def test_mistakes_are_one_line_before_anything_loads(dashboards, explainer, capsys, change, message):
    assert main(command(dashboards, explainer, *change)) == 2
    err = capsys.readouterr().err
    assert message.format(explainer=explainer) in err and err.count("\n") == 1
    assert not (dashboards / "explanations.jsonl").exists()


def test_a_language_model_is_refused_as_the_embedding_model_before_the_explainer_loads(
    dashboards, explainer, capsys
):
    assert (
        main(command(dashboards, explainer, "--scorer", "embedding", "--embedding-model", str(explainer)))
        == 2
    )
    err = capsys.readouterr().err
    assert err == (
        f"interp: error: --embedding-model: {explainer} is a language model (lm_head='linear'), not a sentence "
        "encoder; give one such as minilm-l6\n"
    )
    assert not (dashboards / "explanations-cache.jsonl").exists()


def test_a_prompt_longer_than_the_context_fails_its_feature_alone(dashboards, tmp_path, capsys):
    short = save_folder(
        tiny_llama(300, num_hidden_layers=1), byte_level_bpe(), tmp_path / "short"
    )  # n_ctx 128
    capsys.readouterr()
    assert main(command(dashboards, short)) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(
        "the explainer's request failed: the prompt is " in line
        and "exceeds the model's context of 128" in line
        for line in err
    )


def test_a_missing_model_and_a_bad_output_are_refused(dashboards, explainer, capsys, tmp_path):
    assert main(command(dashboards, tmp_path / "no-such-model")) == 2
    assert f"--explainer: no model '{tmp_path / 'no-such-model'}'" in capsys.readouterr().err
    (tmp_path / "dir.jsonl").mkdir()
    assert main(command(dashboards, explainer, "--out", str(tmp_path / "dir.jsonl"))) == 2
    assert "--out" in capsys.readouterr().err and not (dashboards / "explanations-cache.jsonl").exists()
