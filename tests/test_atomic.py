"""Atomic writes: the target is the old file or the new one, never part of one, and no temporary file stays."""

from __future__ import annotations

import doctest

import pytest

from interp import atomic


def test_a_write_that_raises_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    target = tmp_path / "state.json"
    atomic.write_atomic(target, lambda tmp: tmp.write_text("old"))

    def half_then_fail(tmp):
        tmp.write_text("ne")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic.write_atomic(target, half_then_fail)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_named_temporary_is_used_and_must_sit_beside_the_target(tmp_path):
    seen = []
    own = tmp_path / ".state.json.7.tmp"
    atomic.write_atomic(tmp_path / "state.json", lambda tmp: seen.append(tmp) or tmp.write_text("x"), tmp=own)
    assert seen == [own] and (tmp_path / "state.json").read_text() == "x" and not own.exists()
    (tmp_path / "sub").mkdir()
    with pytest.raises(
        ValueError, match=r"must be in the folder of .*state\.json, or the rename is not atomic"
    ):
        atomic.write_atomic(tmp_path / "state.json", lambda tmp: None, tmp=tmp_path / "sub" / "x.tmp")


def test_docstring_example():
    result = doctest.testmod(atomic)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_every_atomic_write_gets_the_mode_a_new_file_gets(tmp_path, mask):
    """safetensors writes through a private temporary of its own (0600): the rename must not carry that mode to
    the target while its siblings get the umask's."""
    import os

    import torch
    from safetensors.torch import save_file

    before = os.umask(mask)
    try:
        atomic.write_atomic(
            tmp_path / "t.safetensors", lambda tmp: save_file({"a": torch.zeros(2)}, str(tmp))
        )
        atomic.write_atomic(tmp_path / "t.json", lambda tmp: tmp.write_text("{}"))
        (tmp_path / "plain.txt").write_text("a file made the ordinary way")
    finally:
        os.umask(before)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == dict.fromkeys(["t.safetensors", "t.json", "plain.txt"], 0o666 & ~mask)


def test_a_set_stopped_while_its_files_are_written_leaves_every_old_file(tmp_path):
    import torch
    from safetensors.torch import save_file

    atomic.write_together(
        tmp_path, {"a": lambda p: p.write_text("old a"), "b": lambda p: p.write_text("old b")}
    )
    atomic.write_together(tmp_path, {"t.safetensors": lambda p: save_file({"x": torch.ones(1)}, str(p))})
    assert (tmp_path / "t.safetensors").stat().st_mode & 0o777 == 0o666 & ~atomic.umask()
    (tmp_path / "t.safetensors").unlink()

    def interrupted(tmp):
        tmp.write_text("half of new b")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic.write_together(tmp_path, {"a": lambda p: p.write_text("new a"), "b": interrupted})
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"a": "old a", "b": "old b"}


def test_ctrl_c_during_the_renames_waits_until_the_last_one(tmp_path, monkeypatch):
    """A SIGINT that arrives between two renames takes effect once every file is in place."""
    import os
    import signal

    renamed = []
    rename = os.replace

    def replace_and_interrupt(src, dst):
        rename(src, dst)
        renamed.append(os.path.basename(dst))
        if len(renamed) == 1:
            signal.raise_signal(
                signal.SIGINT
            )  # the handler runs now: Ctrl-C between the first and second rename

    monkeypatch.setattr(atomic.os, "replace", replace_and_interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_together(tmp_path, {"a": lambda p: p.write_text("1"), "b": lambda p: p.write_text("2")})
    assert renamed == ["a", "b"]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"a": "1", "b": "2"}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is given back


BUILDER = """
import importlib.util, os, sys, time
from pathlib import Path

spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])  # atomic.py alone, without the package
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)
target, log, name = Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
(log.parent / f"ready-{name}").write_text("")
while len(list(log.parent.glob("ready-*"))) < 2:  # both builders ask at the same moment
    time.sleep(0.005)


def build(folder):
    with log.open("a") as f:
        f.write(f"built by {name}\\n")
    (folder / "half.bin").write_text("half")
    time.sleep(0.5)  # the other builder asks while this one is half way
    (folder / "whole.bin").write_text(name)


print(sorted(p.name for p in atomic.built_once(target, build, record=name).iterdir()))
"""


def test_two_processes_racing_to_build_a_folder_build_it_once(tmp_path):
    """Two processes (as two pytest workers) ask for the same cache folder at the same moment: one builds it, the
    other waits for it and finds it complete; nothing but the folder and its lock is left beside it."""
    import subprocess
    import sys

    script = tmp_path / "builder.py"
    script.write_text(BUILDER)
    target, log = tmp_path / "cache" / "folder", tmp_path / "log"
    racers = [
        subprocess.Popen(
            [sys.executable, str(script), atomic.__file__, str(target), str(log), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    outputs = [racer.communicate(timeout=60) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], outputs
    assert [out for out, _ in outputs] == ["['.complete', 'half.bin', 'whole.bin']\n"] * 2
    (builder,) = log.read_text().splitlines()  # one build, not two
    name = builder.removeprefix("built by ")
    assert (target / "whole.bin").read_text() == (target / atomic.COMPLETE).read_text() == name
    assert sorted(p.name for p in target.parent.iterdir()) == ["folder", "folder.lock"]
    assert target.stat().st_mode & 0o777 == 0o777 & ~atomic.umask()  # not the temporary folder's 0700


def test_a_folder_left_incomplete_is_replaced_and_a_failed_build_leaves_nothing(tmp_path):
    target = tmp_path / "folder"
    target.mkdir()
    (target / "half.bin").write_text("x")  # a builder killed before it finished (the layout older runs left)
    assert atomic.built_once(target, lambda folder: (folder / "whole.bin").write_text("y")) == target
    assert sorted(p.name for p in target.iterdir()) == [".complete", "whole.bin"]
    assert atomic.built_once(target, lambda folder: pytest.fail("a complete folder is built again")) == target

    def failing(folder):
        (folder / "part.bin").write_text("z")
        raise OSError("disk full")

    other = tmp_path / "other"
    with pytest.raises(OSError, match="disk full"):
        atomic.built_once(other, failing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "folder.lock", "other.lock"]
