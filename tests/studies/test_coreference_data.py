"""The coreference data: every shipped line is valid, each broken rule is reported, twins and splits hold."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from studies.data.load import (
    AgreementItem,
    ResolutionItem,
    load_items,
    split_by_schema,
    twin_pairs,
    validate,
)

DATA = Path(__file__).resolve().parents[2] / "studies" / "data"


@pytest.fixture(scope="module")
def winograd() -> list[ResolutionItem]:
    return load_items("winograd")  # type: ignore[return-value]


@pytest.fixture(scope="module")
def agreement() -> list[AgreementItem]:
    return load_items("agreement")  # type: ignore[return-value]


# --- the shipped files --------------------------------------------------------------------------------------


def test_shipped_resolution_counts_and_balance(winograd):
    assert all(isinstance(item, ResolutionItem) for item in winograd)
    pairs = twin_pairs(winograd)
    assert len(winograd) >= 220 and len(pairs) >= 110
    assert len(pairs) * 2 == len(winograd)
    assert all({a.answer, b.answer} == {0, 1} for a, b in pairs)
    answers = Counter(item.answer for item in winograd)
    assert answers[0] == answers[1]
    assert 0.3 < sum(a.answer == 0 for a, _ in pairs) / len(pairs) < 0.7  # twin "a" is not always answer 0


def test_shipped_resolution_variety(winograd):
    pronouns = Counter(item.pronoun for item in winograd)
    assert set(pronouns) >= {"it", "they", "he", "she", "him", "her", "his"}
    for connective in (" because ", " but ", " so ", " although "):
        assert any(connective in item.sentence for item in winograd), connective
    before = sum(i.switch_char_offset < i.pronoun_char_offset for i, _ in twin_pairs(winograd))
    assert 10 <= before < len(winograd) / 4  # sometimes before the pronoun, mostly after


def test_shipped_agreement_counts_and_kinds(agreement):
    assert all(isinstance(item, AgreementItem) for item in agreement)
    pairs = twin_pairs(agreement)
    assert len(agreement) >= 220 and len(pairs) >= 110
    assert all(a.answer != b.answer and a.targets == b.targets for a, b in pairs)
    two_names = [a for a, _ in pairs if a.distractor is not None]
    assert len(two_names) >= 40
    targets = {t for item in agreement for t in item.targets}
    assert targets >= {" she", " he", " they", " it", " his", " her", " their", " herself", " himself"}
    assert sum(item.prompt.endswith(" that") for item in agreement) >= 20  # "X said that"
    assert sum(item.prompt.endswith("n't") for item in agreement) >= 60


def test_shipped_ids_are_unique_across_files(winograd, agreement):
    ids = [item.id for item in winograd + agreement]
    assert len(ids) == len(set(ids))


def test_shipped_files_match_their_build_script(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("coreference_data_build", DATA / "build.py")
    build = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, build)  # dataclasses look their module up while defined
    spec.loader.exec_module(build)
    build.main(tmp_path)
    for name in ("winograd.jsonl", "agreement.jsonl"):
        assert (tmp_path / name).read_text() == (DATA / name).read_text(), f"{name} is stale: run build.py"


def test_resolution_twins_differ_exactly_in_the_switch(winograd):
    for a, b in twin_pairs(winograd):
        off = a.switch_char_offset
        assert b.switch_char_offset == off and a.switch_word != b.switch_word
        assert a.sentence[:off] == b.sentence[:off]
        assert a.sentence[off + len(a.switch_word) :] == b.sentence[off + len(b.switch_word) :]
        assert a.candidates == b.candidates and a.pronoun == b.pronoun
        for item in (a, b):
            assert item.sentence[item.pronoun_char_offset :].startswith(item.pronoun)
            for cand, cand_off in zip(item.candidates, item.candidate_char_offsets, strict=True):
                assert item.sentence[cand_off : cand_off + len(cand)] == cand
                assert cand_off + len(cand) <= item.pronoun_char_offset


def test_agreement_twins_differ_exactly_in_the_antecedent(agreement):
    for a, b in twin_pairs(agreement):
        off = a.antecedent_char_offset
        assert b.antecedent_char_offset == off and a.antecedent != b.antecedent
        assert a.prompt[:off] == b.prompt[:off]
        assert a.prompt[off + len(a.antecedent) :] == b.prompt[off + len(b.antecedent) :]
        assert a.distractor == b.distractor
        for item in (a, b):
            assert item.prompt == item.prompt.rstrip()
            if item.distractor is not None:
                d = item.distractor_char_offset
                assert item.prompt[d : d + len(item.distractor)] == item.distractor


def test_item_properties(winograd, agreement):
    item = winograd[0]
    assert item.referent == item.candidates[item.answer] and item.other != item.referent
    item = agreement[0]
    assert item.target == item.targets[item.answer] and item.target not in item.foils


# --- splits -------------------------------------------------------------------------------------------------


def test_split_keeps_twins_together_and_is_deterministic(winograd):
    a, b = split_by_schema(winograd, fraction=0.3, seed=7)
    assert len(a) + len(b) == len(winograd)
    assert not {i.schema_id for i in a} & {i.schema_id for i in b}
    assert Counter(i.schema_id for i in a + b) == Counter(i.schema_id for i in winograd)
    assert set(Counter(i.schema_id for i in a).values()) == {2}
    assert len({i.schema_id for i in a}) == round(0.3 * len(twin_pairs(winograd)))
    again = split_by_schema(list(reversed(winograd)), fraction=0.3, seed=7)
    assert {i.id for i in again[0]} == {i.id for i in a}
    other = split_by_schema(winograd, fraction=0.3, seed=8)
    assert {i.id for i in other[0]} != {i.id for i in a}
    validate(a)
    validate(b)


def test_split_rejects_bad_fraction(winograd):
    with pytest.raises(ValueError, match="fraction"):
        split_by_schema(winograd, fraction=1.5)


# --- broken files -------------------------------------------------------------------------------------------

RES_A = {
    "id": "t-1a",
    "schema_id": "t-1",
    "twin_id": "t-1b",
    "sentence": "The dog chased the cat because it was hungry.",
    "pronoun": "it",
    "pronoun_char_offset": 31,
    "candidates": ["The dog", "the cat"],
    "candidate_char_offsets": [0, 15],
    "answer": 0,
    "switch_word": "hungry",
    "switch_char_offset": 38,
}
RES_B = {
    **RES_A,
    "id": "t-1b",
    "twin_id": "t-1a",
    "sentence": "The dog chased the cat because it was fleeing.",
    "answer": 1,
    "switch_word": "fleeing",
}
AG_A = {
    "id": "t-2a",
    "schema_id": "t-2",
    "twin_id": "t-2b",
    "prompt": "When Tom left, Mary was sad, wasn't",
    "targets": [" she", " he"],
    "answer": 0,
    "antecedent": "Mary",
    "antecedent_char_offset": 15,
    "distractor": "Tom",
    "distractor_char_offset": 5,
}
AG_B = {**AG_A, "id": "t-2b", "twin_id": "t-2a", "prompt": "When Tom left, Paul was sad, wasn't", "answer": 1,
        "antecedent": "Paul"}  # fmt: skip


def write(tmp_path: Path, *records: dict | str) -> Path:
    path = tmp_path / "items.jsonl"
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tiny_valid_files_load(tmp_path):
    assert [i.id for i in load_items(write(tmp_path, RES_A, RES_B))] == ["t-1a", "t-1b"]
    assert [i.id for i in load_items(str(write(tmp_path, AG_A, AG_B)))] == ["t-2a", "t-2b"]


BROKEN = [
    # (records, line number named in the message, words the message must contain)
    ([RES_A, "{not json"], 2, "not valid JSON"),
    ([RES_A, {k: v for k, v in RES_B.items() if k != "answer"}], 2, "missing field(s) answer"),
    ([RES_A, {**RES_B, "extra": 1}], 2, "unknown field(s) extra"),
    ([RES_A, {**RES_B, "answer": "1"}], 2, "field 'answer' should be int"),
    ([RES_A, {"id": "x"}], 2, "cannot tell the kind"),
    ([{**RES_A, "pronoun_char_offset": 30}, RES_B], 1, "pronoun 'it' is not at offset 30"),
    ([RES_A, {**RES_B, "candidate_char_offsets": [0, 14]}], 2, "candidate 'the cat' is not at offset 14"),
    ([{**RES_A, "candidates": ["The dog", "the cow"]}, RES_B], 1, "'the cow' is not at offset 15"),
    (
        [
            {**RES_A, "candidates": ["The dog", "hungry"], "candidate_char_offsets": [0, 38]},
            {**RES_B, "candidates": ["The dog", "hungry"], "candidate_char_offsets": [0, 38]},
        ],
        1,
        "does not come before the pronoun",
    ),
    ([{**RES_A, "answer": 2}, RES_B], 1, "answer 2 is out of range"),
    ([RES_A, {**RES_B, "switch_char_offset": 37}], 2, "switch_word 'fleeing' is not at offset 37"),
    ([RES_A, {**RES_B, "twin_id": "t-9"}], 1, "points to 't-9', not back"),
    ([RES_A], 1, "twin 't-1b' is missing"),
    ([RES_A, {**RES_B, "answer": 0}], 1, "has the same answer"),
    (
        [
            RES_A,
            {
                **RES_B,
                "sentence": RES_B["sentence"].replace("The dog", "The fox"),
                "candidates": ["The fox", "the cat"],
            },
        ],
        1,
        "other candidates",
    ),  # fmt: skip
    (
        [RES_A, {**RES_B, "sentence": RES_B["sentence"].replace("chased", "hunted")}],
        1,
        "differs from it outside the switch region",
    ),
    ([RES_A, RES_B, RES_A], 3, "duplicate id"),
    ([RES_A, RES_B, AG_A, AG_B], 3, "a file holds one kind only"),
    ([{**AG_A, "antecedent_char_offset": 14}, AG_B], 1, "antecedent 'Mary' is not at offset 14"),
    ([AG_A, {**AG_B, "answer": 2}], 2, "answer 2 is out of range for 2 targets"),
    ([AG_A, {**AG_B, "targets": ["she", "he"]}], 2, "single leading space"),
    ([AG_A, {**AG_B, "prompt": AG_B["prompt"] + " "}], 2, "without trailing whitespace"),
    ([AG_A, {**AG_B, "distractor_char_offset": None}], 2, "both be null or both be set"),
    ([AG_A, {**AG_B, "distractor_char_offset": 6}], 2, "distractor 'Tom' is not at offset 6"),
    ([AG_A, {**AG_B, "prompt": AG_B["prompt"].replace("sad", "ill")}], 1, "outside the antecedent region"),
    ([AG_A, {**AG_B, "answer": 0}], 1, "has the same answer"),
    ([AG_A, {**AG_B, "schema_id": "t-3"}], 1, "has schema_id 't-3'"),
]


@pytest.mark.parametrize(("records", "line", "problem"), BROKEN, ids=[b[2] for b in BROKEN])
def test_broken_line_is_reported_with_file_line_and_problem(tmp_path, records, line, problem):
    path = write(tmp_path, *records)
    with pytest.raises(ValueError) as info:
        load_items(path)
    message = str(info.value)
    assert f"{path}:{line}" in message
    assert problem in message


def test_every_problem_is_listed_with_its_id(tmp_path):
    path = write(tmp_path, {**RES_A, "answer": 5}, {**RES_B, "pronoun_char_offset": 0})
    with pytest.raises(ValueError) as info:
        load_items(path)
    message = str(info.value)
    assert f"{path}:1: item 't-1a': answer 5" in message
    assert f"{path}:2: item 't-1b': pronoun 'it' is not at offset 0" in message


def test_empty_file_and_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="no items"):
        load_items(write(tmp_path, ""))
    with pytest.raises(FileNotFoundError, match="'winograd', 'agreement'"):
        load_items("winogrande")


def test_validate_accepts_items_built_in_memory():
    a = AgreementItem(**{**AG_A, "targets": tuple(AG_A["targets"])})
    b = AgreementItem(**{**AG_B, "targets": tuple(AG_B["targets"])})
    validate([a, b])
    with pytest.raises(ValueError, match="<memory>: item 't-2a': twin 't-2b' is missing"):
        validate([a])
