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
