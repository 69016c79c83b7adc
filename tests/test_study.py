"""Every study refuses unusable input in one line, before any model is loaded or any work done, losing nothing.

Each registered study is run through the ``interp`` command with a mistake: ``--device cuda`` on a CPU-only
torch, an ``--out`` that is a file, a folder that is not a report, or an unwritable place, an abbreviated
flag, a model that is not there. Loading a model, building any model (random ones included) and the scaling
study's Monte Carlo are made to fail the test, so a check that came after the work would show.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

from interp import HookedTransformer, cli
from interp.registry import list_studies, study_parser
from interp.study import StudyInputError, check_device, check_dtype, find_model, start

STUDIES = sorted(list_studies())


@pytest.fixture
def no_work(monkeypatch):
    """Any model load, model construction or Monte Carlo fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the study started work before its checks were done")

    monkeypatch.setattr(importlib.import_module("interp.load.instantiate"), "load_checkpoint", refuse)
    monkeypatch.setattr(HookedTransformer, "__init__", refuse)
    monkeypatch.setattr(importlib.import_module("studies.scaling.study"), "monte_carlo", refuse)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _run(argv, capsys) -> tuple[int, str]:
    """Exit status and stderr of ``interp ARGV``, whether the error came from argparse or from a check."""
    try:
        status = cli.main(argv)
    except SystemExit as exit:
        status = exit.code
    return status, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_every_seed_study_is_registered():
    assert set(STUDIES) >= {"coreference", "heads", "position", "recurrence", "residual", "scaling"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch that cannot use CUDA")
@pytest.mark.parametrize("study", STUDIES)
def test_device_cuda_on_a_cpu_only_torch_is_one_line_before_any_work(study, tmp_path, capsys, no_work):
    status, err = _run(["study", study, "--device", "cuda", "--out", str(tmp_path / "r")], capsys)
    line = _one_line(err)
    assert status == 2 and "cuda" in line
    # parse_device's own refusal ("cannot be used ... available here: cpu") where it checks availability,
    # else the scaffold's probe ("not available here ... use --device cpu"); a CPU-only study says so first
    assert any(reason in line for reason in ("cannot be used", "not available here", "runs on the CPU only"))
    assert any(advice in line for advice in ("available here: cpu", "use --device cpu", "drop --device"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("study", STUDIES)
@pytest.mark.parametrize(
    "place", ["file", "not_a_report", "under_a_file", "unwritable", "user_file_in_figures"]
)
def test_unusable_out_is_one_line_before_any_work_and_loses_nothing(
    study, place, tmp_path, capsys, monkeypatch, no_work
):
    out = tmp_path / "r"
    expected = {
        "file": "it is a file",
        "not_a_report": "holds index.html, which a report did not write (there is no manifest.json)",
        "under_a_file": "is a file, so no folder can be made under it",
        "unwritable": "cannot create files in",
        "user_file_in_figures": "holds figures/mine.png, which a report did not write",
    }[place]
    if place == "file":
        out.write_text("my notes")
    elif place == "not_a_report":
        out.mkdir()
        (out / "notes.md").write_text("my notes")
        (out / "index.html").write_text("my page")
    elif place == "under_a_file":
        (tmp_path / "f").write_text("my notes")
        out = tmp_path / "f" / "r"
    elif place == "unwritable":
        locked = tmp_path / "locked"
        locked.mkdir()
        out = locked / "r"
        real = tempfile.mkdtemp

        def refuse(*args, dir=None, **kwargs):  # as the OS does for a user without write permission
            if dir is not None and Path(dir) == locked:
                raise PermissionError(13, "Permission denied", str(locked))
            return real(*args, dir=dir, **kwargs)

        monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    else:
        out.mkdir()
        (out / "manifest.json").write_text(json.dumps({"files": {"index.html": "0" * 64}}))
        (out / "index.html").write_text("an earlier report")
        (out / "figures").mkdir()
        (out / "figures" / "mine.png").write_bytes(b"my figure")
    before = _files(tmp_path)
    status, err = _run(["study", study, "--out", str(out)], capsys)
    line = _one_line(err)
    assert status == 2
    assert expected in line and str(out) in line
    assert _files(tmp_path) == before


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="no /proc on this system")
def test_out_in_proc_is_refused_even_for_root(capsys, no_work):
    status, err = _run(["study", "heads", "--out", "/proc/interp-reports/heads"], capsys)
    assert status == 2 and "cannot create files in '/proc'" in _one_line(err)


def test_unwritable_out_by_permissions(tmp_path, capsys, no_work):
    locked = tmp_path / "locked"
    locked.mkdir()
    with _unwritable(locked):
        status, err = _run(["study", "scaling", "--out", str(locked / "r")], capsys)
    assert status == 2 and "cannot create files in" in _one_line(err)


@contextlib.contextmanager
def _unwritable(folder: Path):
    """``folder`` made unwritable for this process: by its mode, or for root (whom modes do not stop), by the
    immutable attribute (``chattr +i``, on file systems that have it)."""
    if os.geteuid() != 0:
        folder.chmod(0o500)
        try:
            yield
        finally:
            folder.chmod(0o700)
        return
    try:
        made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    except OSError as err:
        pytest.skip(f"root writes through modes, and chattr cannot run here: {err}")
    if made.returncode != 0:
        pytest.skip(f"root writes through modes, and chattr +i failed here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.mark.parametrize("study", STUDIES)
def test_abbreviated_flags_are_refused_in_one_line(study, tmp_path, capsys, no_work):
    status, err = _run(["study", study, "--qui", "--out", str(tmp_path / "r")], capsys)
    line = _one_line(err)
    assert status == 2
    assert f"interp study {study}: error: unrecognized arguments: --qui" in line
    assert list(tmp_path.iterdir()) == []


def test_model_is_never_taken_for_models(tmp_path, capsys, no_work):
    status, err = _run(["study", "scaling", "--model", "/nonexistent", "--out", str(tmp_path / "r")], capsys)
    assert status == 2
    assert "unrecognized arguments: --model /nonexistent" in _one_line(err)


@pytest.mark.parametrize(
    ("study", "flag"),
    [("scaling", "--models"), ("position", "--models"), ("heads", "--models"), ("residual", "--model")],
)
def test_a_model_that_is_not_there_is_an_error_not_a_skip(study, flag, tmp_path, capsys, no_work):
    missing = str(tmp_path / "nonexistent")
    status, err = _run(["study", study, flag, missing, "--out", str(tmp_path / "r")], capsys)
    line = _one_line(err)
    assert status == 2
    assert f"{flag} {missing}: no model {missing!r}" in line
    assert not (tmp_path / "r").exists()


def test_coreference_needs_its_model_and_data(tmp_path, capsys, no_work):
    missing = str(tmp_path / "absent.gguf")
    status, err = _run(["study", "coreference", "--model", missing, "--out", str(tmp_path / "r")], capsys)
    assert status == 2 and f"--model {missing}: no model" in _one_line(err)
    status, err = _run(["study", "coreference", "--data", "winogrand", "--out", str(tmp_path / "r")], capsys)
    line = _one_line(err)
    assert status == 2 and "no data set 'winogrand'" in line and "'winograd', 'agreement'" in line
    status, err = _run(["study", "coreference", "--limit", "0", "--out", str(tmp_path / "r")], capsys)
    assert status == 2 and "--limit 0: give at least 1 item" in _one_line(err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["study", "scaling", "--dtype", "int8"], "--dtype 'int8' is not a floating torch dtype"),
        (["study", "scaling", "--device", "gpu"], "device='gpu' is not a device"),
        (["study", "recurrence", "--dtype", "bfloat16"], "the recurrence study runs in float32 only"),
        (
            ["study", "recurrence", "--steps", "0"],
            "argument --steps: '0' is not a whole number of at least 1",
        ),
        (
            ["study", "recurrence", "--distances", "4,x"],
            "argument --distances: '4,x' is not a comma-separated",
        ),
        (
            ["study", "scaling", "--n-queries", "1"],
            "argument --n-queries: '1' is not a whole number of at least 2",
        ),
    ],
)
def test_bad_flags_are_one_line_before_any_work(argv, message, tmp_path, capsys, no_work):
    status, err = _run([*argv, "--out", str(tmp_path / "r")], capsys)
    assert status == 2 and message in _one_line(err)
    assert list(tmp_path.iterdir()) == []


def test_rewriting_a_study_report_keeps_the_users_files(tmp_path, capsys):
    out = tmp_path / "scaling"
    argv = ["study", "scaling", "--models", "", "--n-queries", "200", "--quiet", "--out", str(out)]
    assert cli.main(argv) == 0
    (out / "notes.md").write_text("what I make of it")
    (out / "drafts").mkdir()
    (out / "drafts" / "plot.png").write_bytes(b"my own plot")
    first = json.loads((out / "results.json").read_text())
    assert cli.main([*argv[:-2], "--seed", "1", "--out", str(out)]) == 0
    assert (out / "notes.md").read_text() == "what I make of it"
    assert (out / "drafts" / "plot.png").read_bytes() == b"my own plot"
    second = json.loads((out / "results.json").read_text())
    assert second != first and json.loads((out / "manifest.json").read_text())["seed"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scaling"]


def test_default_models_not_installed_are_skipped_and_said(monkeypatch, tmp_path, capsys):
    import importlib

    def not_installed(name):
        raise FileNotFoundError(f"packaged model {name!r} needs a package, which is not installed")

    monkeypatch.setattr(importlib.import_module("interp.load.packaged"), "packaged_path", not_installed)
    parser = study_parser("demo", "d", default_model=None, default_models=("smollm2-135m", "minilm-l6"))
    run = start(parser, ["--out", str(tmp_path / "r")])
    assert run.models == () and sorted(run.skipped) == ["minilm-l6", "smollm2-135m"]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "interp study demo: skipping smollm2-135m: packaged model 'smollm2-135m' needs a package, which is not "
        "installed",
        "interp study demo: skipping minilm-l6: packaged model 'minilm-l6' needs a package, which is not installed",
    ]
    with pytest.raises(StudyInputError, match=r"--models smollm2-135m: packaged model 'smollm2-135m' needs"):
        start(parser, ["--models", "smollm2-135m", "--out", str(tmp_path / "r")])
    required = study_parser("demo", "d", model_required=True)
    with pytest.raises(StudyInputError, match=r"--model smollm2-135m: packaged model"):
        start(required, ["--out", str(tmp_path / "r")])


def test_run_fills_the_report_and_records_the_command(tmp_path):
    parser = study_parser("demo", "d", default_model=None)
    run = start(parser, ["--out", str(tmp_path / "r"), "--seed", "7", "--quiet", "--dtype", "bfloat16"])
    report = run.report("Demo", config={"n": 1})
    report.add_results({"x": 1})
    assert run.finish(report) == 0
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["command"] == ["interp", "study", "demo", "--out", str(tmp_path / "r"), "--seed", "7",
                                   "--quiet", "--dtype", "bfloat16"]  # fmt: skip
    assert (manifest["seed"], manifest["device"], manifest["dtype"]) == (7, "cpu", "bfloat16")
    assert run.dtype == torch.bfloat16 and run.device is None


def test_checks_accept_what_works_and_find_models(tmp_path):
    assert check_device(None) is None and check_device("cpu") == torch.device("cpu")
    assert check_dtype(None) is None and check_dtype("float16") == torch.float16
    folder = tmp_path / "model"
    folder.mkdir()
    assert find_model(str(folder)) == folder
    with pytest.raises(FileNotFoundError, match=r"no model 'nope': it is not a packaged model"):
        find_model("nope")
    with pytest.raises(StudyInputError, match=r"the demo study runs on the CPU only \(timings\)"):
        check_device("meta", "demo", cpu_only="timings")


@pytest.mark.parametrize("study", STUDIES)
def test_study_help_lists_the_shared_flags(study, capsys):
    assert cli.main(["study", study, "--help"]) == 0  # the study's own help, as a status
    out = capsys.readouterr().out
    assert all(flag in out for flag in ("--out", "--device", "--dtype", "--seed", "--quiet"))


def test_residual_refuses_a_model_without_unembedding_before_the_random_stacks(tmp_path, capsys, monkeypatch):
    from interp import TransformerConfig
    from interp.study import StudyRun

    encoder = HookedTransformer(
        TransformerConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=10, n_ctx=8, lm_head="none", seed=0)
    )
    monkeypatch.setattr(StudyRun, "load", lambda self, name: encoder)

    def refuse(*args, **kwargs):
        raise AssertionError("the random stacks ran before the model was checked")

    monkeypatch.setattr(importlib.import_module("studies.residual.study"), "gradient_table", refuse)
    folder = tmp_path / "encoder"
    folder.mkdir()
    status, err = _run(["study", "residual", "--model", str(folder), "--out", str(tmp_path / "r")], capsys)
    assert status == 2
    assert f"--model {folder} has no unembedding" in _one_line(err)
    assert not (tmp_path / "r").exists()
