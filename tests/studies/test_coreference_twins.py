"""Imperfect twins, as real benchmarks have them: a schema of three sentences, a link that is not returned,
twins that differ in two places, a candidate that occurs twice, twins with other candidates and items with
no twin. Each is kept, left out only of the analyses it cannot serve, counted and warned about once per kind.
"""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

from studies.coreference.behaviour import resolution_table
from studies.coreference.coverage import coverage_table
from studies.coreference.plan import Planned
from studies.data.load import read_data, split_by_schema
from studies.data.notes import DataWarning
from studies.data.twins import pair_up


def item(id_, sentence, pronoun, candidates, answer, twin=None, nth=1):
    offset = -1
    for _ in range(nth):
        offset = sentence.index(f" {pronoun} ", offset + 1) + 1
    row = {"id": id_, "sentence": sentence, "pronoun": pronoun, "pronoun_char_offset": offset,
           "candidates": candidates, "answer": answer}  # fmt: skip
    return row | ({"twin_id": twin} if twin else {})


MAN = "The man couldn't lift his son because he was so {}."
ANNA = "Anna did a lot {} than her friend Lucy because she had {} so hard."
CAT = "The cat saw the dog, and the dog barked at the cat because it was {}."
ROWS = [
    item(
        "tw-a",
        "The truck passed the bicycle because it was faster.",
        "it",
        ["The truck", "the bicycle"],
        0,
        "tw-b",
    ),
    item(
        "tw-b",
        "The truck passed the bicycle because it was slower.",
        "it",
        ["The truck", "the bicycle"],
        1,
        "tw-a",
    ),
    # a schema of three sentences: the third names the first, which names the second
    item("th-a", MAN.format("weak"), "he", ["The man", "his son"], 0, "th-b"),
    item("th-b", MAN.format("heavy"), "he", ["The man", "his son"], 1, "th-a"),
    item("th-c", MAN.format("tired"), "he", ["The man", "his son"], 0, "th-a"),
    # twins that differ in two places, on both sides of the pronoun
    item("rg-a", ANNA.format("better", "studied"), "she", ["Anna", "Lucy"], 0, "rg-b"),
    item("rg-b", ANNA.format("worse", "not studied"), "she", ["Anna", "Lucy"], 1, "rg-a"),
    # a candidate that occurs twice before the pronoun
    item("rp-a", CAT.format("scared"), "it", ["The cat", "the dog"], 0, "rp-b"),
    item("rp-b", CAT.format("angry"), "it", ["The cat", "the dog"], 1, "rp-a"),
    # a link that is not returned
    item("nr-a", "Sue beat Sally because she had a good start.", "she", ["Sue", "Sally"], 0, "nr-b"),
    item("nr-b", "Sue beat Sally because she had a bad start.", "she", ["Sue", "Sally"], 1),
    # twins with other candidates (the switched word is a candidate)
    item("oc-a", "Bob gave Tom a coat because he was cold.", "he", ["Bob", "Tom"], 1, "oc-b"),
    item("oc-b", "Bob gave Ann a coat because he was kind.", "he", ["Bob", "Ann"], 0, "oc-a"),
    item("solo", "The fish ate the worm because it was hungry.", "it", ["The fish", "the worm"], 0),
]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "imperfect.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    return read_data(path)


def test_what_is_derived_for_each_kind_of_imperfection(data):
    items = {x.id: x for x in data.items}
    assert {items[i].schema_id for i in ("th-a", "th-b", "th-c")} == {"th-a"}
    assert items["nr-b"].schema_id == "nr-a" and items["solo"].schema_id == "solo"
    assert items["tw-a"].switch_word == "faster" and items["th-c"].switch_word == "tired"
    assert items["rg-a"].switch_word is None and items["rg-b"].switch_word is None
    # the mention nearest the pronoun is the candidate's position
    assert items["rp-a"].candidate_char_offsets == (CAT.index("the cat"), CAT.index("the dog barked"))
    assert data.notes.ids == {
        "regions": ["rg-a", "rg-b", "oc-a", "oc-b"],
        "candidate_repeated": ["rp-a", "rp-b"],
    }


def test_pairs_each_analysis_can_use(data):
    pairing = pair_up(data.items, data.notes)
    ids = [x.id for x in data.items]
    named = lambda pairs: [(ids[a], ids[b]) for a, b in pairs]  # noqa: E731
    assert named(pairing.pairs) == [("tw-a", "tw-b"), ("th-a", "th-b"), ("rg-a", "rg-b"), ("rp-a", "rp-b"),
                                    ("oc-a", "oc-b")]  # fmt: skip
    assert named(pairing.comparable) == named(pairing.pairs)[:4]
    assert pairing.aligned == (True, True, False, True)  # "better"/"worse" comes before the pronoun
    assert data.notes.ids["one_way"] == ["th-c", "nr-a"]
    assert data.notes.ids["no_twin"] == ["nr-b", "solo"]
    assert data.notes.ids["other_candidates"] == ["oc-a", "oc-b"]
    for seed in range(4):  # the three sentences of a schema always land on one side of a split
        first, _ = split_by_schema(data.items, 0.5, seed=seed)
        assert {x.id for x in first if x.schema_id == "th-a"} in (set(), {"th-a", "th-b", "th-c"})


def test_one_warning_per_kind(data):
    pair_up(data.items, data.notes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data.warn("imperfect")
    messages = [str(w.message) for w in caught if issubclass(w.category, DataWarning)]
    lines = {w.lineno for w in caught}
    assert {w.filename for w in caught} == {str(data.path)}
    assert lines == {8, 6, 5, 11, 12}  # the line of the first item of each kind: rp-a, rg-a, th-c, nr-b, oc-a
    assert len(messages) == len(data.notes.ids) == 5
    assert any(
        m.startswith("imperfect: 4 item(s) differ from their twin in several places") for m in messages
    )
    assert any(m.startswith("imperfect: 2 item(s) name a twin that does not name them back")
               for m in messages)  # fmt: skip


def _records(items, correct):
    return [{"id": x.id, "schema_id": x.schema_id, "answer": x.answer, "nearest_candidate": 1,
             "correct": dict.fromkeys(("full", "partial", "question", "lm_eval"), ok)}
            for x, ok in zip(items, correct, strict=True)]  # fmt: skip


def test_pair_accuracy_counts_the_usable_pairs(data):
    pairing = pair_up(data.items, data.notes)
    correct = [True] * len(data.items)
    correct[1] = False  # tw-b wrong: its pair is not both right
    table = resolution_table(_records(data.items, correct), pairing.pairs).set_index("method")
    row = table.loc["full scoring"]
    assert (row["n"], row["correct"], row["pairs"]) == (14, 13, 5)
    assert row["pair_accuracy"] == pytest.approx(4 / 5)
    assert row["stderr"] == pytest.approx((13 / 14 * (1 / 14) / 13) ** 0.5)


def test_coverage_says_what_each_analysis_used_and_why(data):
    pairing = pair_up(data.items, data.notes)
    planned = Planned(data, "imperfect", pairing)
    analysis = {"pairs_used": 2, "pairs_kept": 3, "heads_skipped": None, "probes_skipped": None}
    table = coverage_table(planned, _records(data.items, [True] * 14), analysis, lm=True).set_index(
        "analysis"
    )
    expect = pd.DataFrame(
        [
            ("behaviour scoring", 14, 0, ""),
            ("pair accuracy", 10, 4, "twin link not returned: 2; no twin: 2"),
            ("attention to the candidates", 14, 0, ""),
            ("attention from the switch word", 8, 6, "differs from its twin in several places: 4; no twin: 2"),
            ("twin differences at each position", 8, 6,
             "twin link not returned: 2; no twin: 2; twin has other candidates or pronoun: 2"),
            ("twin patching", 4, 10, "twin link not returned: 2; no twin: 2; twin has other candidates or pronoun: 2; "
             "twins tokenize to different lengths: 2; beyond --patch-pairs: 2"),
            ("held-out head test", 14, 0, ""),
            ("probes", 14, 0, ""),
        ],
        columns=["analysis", "items", "left_out", "why"],
    ).set_index("analysis")  # fmt: skip
    pd.testing.assert_frame_equal(table, expect)
