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


def test_the_one_rule_replaces_only_what_the_record_lists(tmp_path):
    """What a command may replace in its output folder: what its record lists; an entry of a name it writes
    that the record does not list is refused, named, and left as it is; other entries are never looked at."""
    from interp.preflight import check_owned

    rule = dict(flag="--out", command="interp attribute", record="graph-manifest.json")
    assert check_owned(tmp_path / "new", ["index.html"], (), **rule) == tmp_path / "new"  # nothing there yet
    (tmp_path / "index.html").write_text("my own page")
    (tmp_path / "notes.txt").write_text("kept")
    check_owned(tmp_path, ["graph.json"], (), **rule)  # index.html is not among the names written
    with pytest.raises(
        FileExistsError,
        match=rf"^--out {tmp_path} holds index.html, which interp attribute did not write \(there is no "
        r"graph-manifest.json\); they are left untouched: move them, or choose a new or empty folder$",
    ):
        check_owned(tmp_path, ["graph.json", "index.html"], (), **rule)
    (tmp_path / "graph-manifest.json").write_text("{}")
    with pytest.raises(FileExistsError, match=r"\(graph-manifest.json there does not list them\)"):
        check_owned(tmp_path, ["index.html"], {"graph.json"}, **rule)
    check_owned(tmp_path, ["index.html"], {"index.html"}, **rule)
    # a folder entry is the command's when every file under it is listed
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.png").write_bytes(b"png")
    (tmp_path / "figures" / "mine.png").write_bytes(b"png")
    check_owned(tmp_path, ["figures"], {"figures/a.png", "figures/mine.png"}, **rule)
    with pytest.raises(FileExistsError, match=r"holds figures/mine.png, which"):
        check_owned(tmp_path, ["figures"], {"figures/a.png"}, **rule)
    # a command that owns the whole folder: every entry counts, unless its record claims the folder
    with pytest.raises(
        FileExistsError,
        match=r"holds figures/a.png, figures/mine.png, graph-manifest.json, index.html, notes.txt, which",
    ):
        check_owned(tmp_path, None, (), **rule)
    check_owned(tmp_path, None, True, **rule)
    assert {p.name for p in tmp_path.iterdir()} == {
        "index.html",
        "notes.txt",
        "graph-manifest.json",
        "figures",
    }
    assert (tmp_path / "index.html").read_text() == "my own page"
