"""One claim for every resumable folder: new, resume or complete; another run's folder, or other files, refused
in one line that names every difference; nothing in a refused folder touched."""

from __future__ import annotations

import json

import pytest

from interp.resumable import Layout, Stage, claim, differences, short

LAYOUT = Layout(record="run.json", what="a test run", other="another run's work", remedy="pick another --out")
RUN = {"model": {"name": "tiny", "fingerprint": "a" * 64}, "seed": 0, "data": [1, 2, 3]}


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _stage(state, compared=None):
    return lambda record: Stage(state, compared)


def test_a_new_folder_is_claimed_and_its_record_written(tmp_path):
    folder = tmp_path / "a" / "b"
    found = claim(folder, RUN, LAYOUT, stage=_stage("resume"), write=lambda: {"identity": "x"})
    assert (found.state, found.record) == ("new", None)
    assert json.loads((folder / "run.json").read_text()) == {"identity": "x"}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert claim(empty, RUN, LAYOUT, stage=_stage("resume")).state == "new"
    assert list(empty.iterdir()) == []  # without write, nothing is written


@pytest.mark.parametrize("state", ["resume", "complete", "new"])
def test_the_same_run_gets_the_state_its_stage_gives(tmp_path, state):
    (tmp_path / "run.json").write_text(json.dumps(RUN))
    found = claim(tmp_path, RUN, LAYOUT, stage=_stage(state))
    assert (found.state, found.record) == (state, RUN)


def test_another_run_is_refused_naming_each_difference_with_its_values_and_nothing_changes(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(RUN))
    (tmp_path / "work.bin").write_bytes(b"hours")
    before = _files(tmp_path)
    other = {**RUN, "model": {"name": "tiny", "fingerprint": "b" * 64}, "seed": 3}
    with pytest.raises(ValueError) as err:
        claim(tmp_path, other, LAYOUT, stage=_stage("resume"), write=lambda: other)
    assert str(err.value) == (
        f"--out {tmp_path} holds another run's work (model.fingerprint was 'aaaaaaaaaaaa…', now 'bbbbbbbbbbbb…'; "
        "seed was 0, now 3); pick another --out"
    )
    assert _files(tmp_path) == before


def test_a_stage_compares_only_its_fields_and_a_run_that_kept_nothing_is_taken_over(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(RUN))
    retry = {**RUN, "seed": 3}
    assert claim(tmp_path, retry, LAYOUT, stage=_stage("resume", ["model", "data"])).state == "resume"
    found = claim(tmp_path, {"anything": 1}, LAYOUT, stage=_stage("new", ()), write=lambda: {"anything": 1})
    assert found.state == "new" and json.loads((tmp_path / "run.json").read_text()) == {"anything": 1}


def test_other_files_without_a_record_a_file_and_a_damaged_record_are_refused(tmp_path):
    (tmp_path / "thesis.tex").write_text("months of work")
    with pytest.raises(ValueError) as err:
        claim(tmp_path, RUN, LAYOUT, stage=_stage("resume"), write=lambda: RUN)
    assert str(err.value) == (
        f"--out {tmp_path} is not empty and holds no run.json (it holds thesis.tex), so it is not a test run; "
        "choose a new or empty folder"
    )
    assert _files(tmp_path) == {"thesis.tex": b"months of work"}
    with pytest.raises(
        ValueError, match=r"^--out .*thesis.tex is a file, not a folder; choose a new or empty folder$"
    ):
        claim(tmp_path / "thesis.tex", RUN, LAYOUT, stage=_stage("resume"))
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "run.json").write_text('{"seed": ')
    with pytest.raises(ValueError, match=r"run.json is not valid JSON .*; delete .*damaged to start over"):
        claim(damaged, RUN, LAYOUT, stage=_stage("resume"))
    keyed = Layout(record="run.json", what="a test run", other="x", remedy="y", key="settings", flag=None)
    (tmp_path / "keyed").mkdir()
    (tmp_path / "keyed" / "run.json").write_text('{"settings": 3}')
    with pytest.raises(ValueError, match=r"run.json is not the record of a test run; give another folder"):
        claim(tmp_path / "keyed", RUN, keyed, stage=_stage("resume"))


def test_the_identity_can_sit_under_a_key_and_a_field_can_be_described_otherwise(tmp_path):
    def describe(key, old, new):
        return f"it was made by {old['name']}, this run uses {new['name']}" if key == "model" else None

    layout = Layout(
        record="meta.json", what="a store", other="another run's store", remedy="use another", key="identity",
        flag=None, describe=describe,
    )  # fmt: skip
    (tmp_path / "meta.json").write_text(json.dumps({"identity": RUN, "complete": True}))
    other = {**RUN, "model": {"name": "big", "fingerprint": "c" * 64}}
    with pytest.raises(ValueError) as err:
        claim(tmp_path, other, layout, stage=_stage("complete"))
    assert str(err.value) == (
        f"{tmp_path} holds another run's store (it was made by tiny, this run uses big); use another"
    )


def test_differences_and_short_values():
    assert differences({"a": 1, "b": {"c": [1, 2]}}, {"a": 1, "b": {"c": [1, 3]}, "d": "x"}) == [
        "b.c was [1, 2], now [1, 3]",
        "d was None, now 'x'",
    ]
    assert short("f" * 64) == "'ffffffffffff…'"
    assert short(list(range(100))).endswith("…") and len(short(list(range(100)))) == 80
