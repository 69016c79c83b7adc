"""The ``interp`` command: exact flags, one-line errors before any model loads, tracebacks only for bugs.

Unwritable outputs are paths under an existing *file* and under ``/proc``: the suite may run as root, where
permission bits do not stop anything, but nothing can be created below a file or in ``/proc`` by anyone.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.cli import main, user_error
from tests.store.models import write_gpt2_folder

LOADER = importlib.import_module("interp.load")  # the package; ``interp.load`` is also the function


def unusable_cuda() -> str:
    """A CUDA device this machine cannot use: ``cuda`` on a CPU-only torch, else an index past the last GPU."""
    return f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


@pytest.fixture
def no_loading(monkeypatch):
    """Make loading a model fail the test: every error must come before it."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the bad input was refused")

    monkeypatch.setattr(LOADER, "load", refuse)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_gpt2_folder(tmp_path_factory.mktemp("ckpt") / "tiny-gpt2")


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("the cat sat\nthe dog\n")
    return path


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep me\n")
    return path


def one_error_line(capsys, *needles: str) -> str:
    """The single line on stderr, checked to name each of ``needles``; nothing on stdout."""
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert captured.out == ""
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def explain(*extra: str) -> list[str]:
    return ["explain", "The cat sat", "--model", "tiny", "--quiet", *extra]


def cache(checkpoint, data, *extra: str) -> list[str]:
    return ["cache", str(checkpoint), "--data", str(data), "--hooks", "hook_embed", "--quiet", *extra]


# Item 2: an unusable device, an unwritable --out: one line, before the model loads ---------------------------


def test_unusable_cuda_device_is_one_line_before_loading(tmp_path, checkpoint, data, capsys, no_loading):
    device = unusable_cuda()
    assert main(explain("--device", device, "--out", str(tmp_path / "e.html"))) == 2
    one_error_line(capsys, "interp: error: ", f"device={device!r} cannot be used", "available here: cpu")
    assert main(cache(checkpoint, data, "--device", device, "--out", str(tmp_path / "acts"))) == 2
    one_error_line(capsys, "interp: error: ", f"device={device!r} cannot be used")
    assert main(["models", "--device", device]) == 2  # `models` takes no device: an unknown flag
    one_error_line(capsys, "unrecognized arguments: --device", "see 'interp models --help'")
    assert not (tmp_path / "e.html").exists() and not (tmp_path / "acts").exists()


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_unwritable_out_is_one_line_before_loading(
    where, tmp_path, checkpoint, data, a_file, capsys, no_loading
):
    base = a_file if where == "under-a-file" else Path("/proc")
    if where == "proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc on this system")
    out = base / "reports" / "x"
    assert main(explain("--out", str(out / "explain.html"))) == 2
    problem = (
        "is a file, so no folder can be made" if where == "under-a-file" else "cannot create files in /proc"
    )
    one_error_line(capsys, "interp: error: --out", problem)
    assert main(cache(checkpoint, data, "--out", str(out))) == 2
    one_error_line(capsys, "interp: error: --out", problem)
    assert main(["models", "--out", str(out)]) == 2  # `models` writes nothing: an unknown flag
    one_error_line(capsys, "unrecognized arguments: --out")
    assert a_file.read_text() == "keep me\n"


def test_out_that_is_a_folder_or_another_file_is_refused_and_kept(tmp_path, a_file, capsys, no_loading):
    assert main(explain("--out", str(tmp_path))) == 2
    one_error_line(capsys, f"--out {tmp_path} is a folder", "explain.html")
    assert main(explain("--out", str(a_file))) == 2
    one_error_line(capsys, f"--out {a_file} exists and is not a .html or .htm file")
    assert a_file.read_text() == "keep me\n"


def test_cache_out_that_is_a_file_is_refused(checkpoint, data, a_file, capsys, no_loading):
    assert main(cache(checkpoint, data, "--out", str(a_file))) == 2
    one_error_line(capsys, f"--out {a_file} is a file, not a folder")
    assert a_file.read_text() == "keep me\n"


def test_explain_flags_are_checked_before_loading(tmp_path, capsys, no_loading):
    out = str(tmp_path / "e.html")
    assert main(explain("--out", out, "--head", "-1")) == 2
    one_error_line(capsys, "interp explain: error: argument --head: -1 is negative", "--help")
    assert main(explain("--out", out, "--layer", "x")) == 2
    one_error_line(capsys, "argument --layer: 'x' is not an integer")
    assert main(explain("--out", out, "--dtype", "int8")) == 2
    one_error_line(capsys, "--dtype 'int8' is not a floating torch dtype")
    assert main(["explain", "  ", "--out", out]) == 2
    one_error_line(capsys, "the text to explain is empty")
    assert main(["explain", "The cat sat", "--model", str(tmp_path / "nope"), "--out", out]) == 2
    one_error_line(
        capsys, f"interp: error: --model: no model '{tmp_path / 'nope'}': it is not a packaged model"
    )


def test_explain_layer_and_head_out_of_range_before_the_forward(tmp_path, monkeypatch, capsys):
    from tests.report.test_explain import tiny_model  # 2 layers, 4 heads

    model = tiny_model()
    monkeypatch.setattr(LOADER, "load", lambda name, **kwargs: model)
    monkeypatch.setattr(
        "interp.preflight.find_model", lambda name, flag=None: Path(name)
    )  # "tiny" is the model above

    def no_forward(*args, **kwargs):
        raise AssertionError("the model ran before the bad layer or head was refused")

    monkeypatch.setattr(model, "run_with_cache", no_forward)
    out = tmp_path / "e.html"
    assert main(explain("--out", str(out), "--head", "4")) == 2
    one_error_line(capsys, "--head 4 is out of range; this model has heads 0..3")
    assert main(explain("--out", str(out), "--layer", "2")) == 2
    one_error_line(capsys, "--layer 2 is out of range; this model has layers 0..1")
    assert not out.exists()


# Item 4: no prefix matching ---------------------------------------------------------------------------------


def test_abbreviated_flags_are_refused(tmp_path, checkpoint, data, capsys, no_loading):
    out = str(tmp_path / "acts")
    argv = ["cache", str(checkpoint), "--data", str(data), "--hooks", "hook_embed", "--out", out]
    assert main([*argv, "--batch", "2"]) == 2  # was read as --batch-size
    one_error_line(capsys, "unrecognized arguments: --batch 2")
    assert main(["cache", str(checkpoint), "--dat", str(data), "--hooks", "hook_embed", "--out", out]) == 2
    one_error_line(capsys, "interp cache: error: the following arguments are required: --data")
    assert main(explain("--out", str(tmp_path / "e.html"), "--lay", "1")) == 2
    one_error_line(capsys, "unrecognized arguments: --lay 1")
    parser_classes = {type(p).__name__ for p in _parsers()}
    assert parser_classes == {"ArgumentParser"} and all(not p.allow_abbrev for p in _parsers())
    assert not Path(out).exists()


def _parsers():
    import argparse

    from interp.cli import build_parser

    root = build_parser()
    found = [root]
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += list(action.choices.values())
    return found


# Which errors are the user's: one line; bugs keep their traceback -------------------------------------------


def test_user_errors_and_bugs_are_told_apart(tmp_path):
    assert user_error(ValueError("bad\n  value")) == "bad value"
    assert user_error(KeyError("'x' is not a packaged model")) == "'x' is not a packaged model"
    assert user_error(FileExistsError(17, "File exists", "/a/b")) == "File exists: /a/b"
    assert user_error(IsADirectoryError(21, "Is a directory", "/a")) == "Is a directory: /a"
    assert user_error(PermissionError(13, "Permission denied", "/root/x")) == "Permission denied: /root/x"
    assert user_error(OSError(28, "No space left on device")) == "No space left on device"
    assert user_error(NotADirectoryError(20, "Not a directory", "/etc/passwd/x")).startswith(
        "Not a directory"
    )
    for bug in (
        TypeError("x"),
        AttributeError("x"),
        RuntimeError("x"),
        AssertionError(),
        IndexError(),
        OSError(),
    ):
        assert user_error(bug) is None


def test_a_bug_keeps_its_traceback_and_debug_keeps_every_traceback(tmp_path, monkeypatch, capsys):
    def broken(args):
        raise AttributeError("'NoneType' object has no attribute 'cfg'")

    monkeypatch.setattr("interp.commands.models.run", broken)
    with pytest.raises(AttributeError):
        main(["models"])

    def user_mistake(args):
        raise ValueError("a user's mistake")

    monkeypatch.setattr("interp.commands.models.run", user_mistake)
    assert main(["models"]) == 2
    one_error_line(capsys, "interp: error: a user's mistake")
    monkeypatch.setenv("INTERP_DEBUG", "1")
    with pytest.raises(ValueError, match="a user's mistake"):
        main(["models"])
    monkeypatch.setenv("INTERP_DEBUG", "0")
    assert main(["models"]) == 2


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("interp.commands.models.run", interrupted)
    assert main(["models"]) == 130
    one_error_line(capsys, "interp: interrupted")


@pytest.mark.slow  # two fresh interpreters importing torch: several seconds each
def test_the_installed_command_prints_one_line(tmp_path, a_file):
    """The real entry point, in a fresh process: ``--device cuda`` ends in one line, exit status 2."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("INTERP_DEBUG", None)
    argv = [sys.executable, "-m", "interp", "explain", "hi", "--device", unusable_cuda(), "--quiet"]
    done = subprocess.run([*argv, "--out", str(tmp_path / "e.html")], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("interp: error: device=")
    done = subprocess.run(
        [*argv[:5], "--out", str(a_file / "e.html")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "is a file" in done.stderr, done.stderr


def test_a_good_cache_command_still_runs(tmp_path, checkpoint, data, capsys):
    out = tmp_path / "acts"
    assert main(cache(checkpoint, data, "--out", str(out))) == 0
    assert json.loads((out / "meta.json").read_text())["complete"] is True
