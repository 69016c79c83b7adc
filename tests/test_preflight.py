"""Output checks made before any model loads: they refuse what cannot be written and touch nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from interp.preflight import check_output_file, check_output_folder


def test_a_writable_place_passes_and_nothing_is_created(tmp_path):
    assert (
        check_output_file(tmp_path / "a" / "b" / "page.html", flag="--out")
        == tmp_path / "a" / "b" / "page.html"
    )
    assert check_output_folder(tmp_path / "x" / "y", flag="--out") == tmp_path / "x" / "y"
    (tmp_path / "old.html").write_text("earlier page")
    check_output_file(tmp_path / "old.html", flag="--out", suffixes=(".html",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.html"]  # no folders, no probe file left


def test_under_a_file(tmp_path):
    blocker = tmp_path / "data.csv"
    blocker.write_text("1,2\n")
    for check in (check_output_file, check_output_folder):
        with pytest.raises(ValueError, match=rf"--out {blocker}/sub/out: {blocker} is a file, so no folder"):
            check(blocker / "sub" / "out", flag="--out")
    assert blocker.read_text() == "1,2\n"


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")
def test_where_nothing_can_be_created():
    with pytest.raises(ValueError, match=r"cannot create files in /proc \(.*\); choose a writable place"):
        check_output_folder("/proc/interp-out", flag="--out")


def test_files_and_folders_are_not_confused(tmp_path):
    (tmp_path / "report.pdf").write_text("%PDF")
    with pytest.raises(ValueError, match=r"report.pdf exists and is not a .html file; it is left untouched"):
        check_output_file(tmp_path / "report.pdf", flag="--out", suffixes=(".html",))
    with pytest.raises(ValueError, match=rf"--out {tmp_path} is a folder; name the file to write, such as"):
        check_output_file(tmp_path, flag="--out")
    with pytest.raises(ValueError, match=r"report.pdf is a file, not a folder"):
        check_output_folder(tmp_path / "report.pdf", flag="--out")
    assert (tmp_path / "report.pdf").read_text() == "%PDF"
