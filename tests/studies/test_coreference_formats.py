"""Coreference data as people have it: each benchmark format read into items, minimal fields derived, and bad
files refused with file, line, id and rule. Every file is written in the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studies.data.load import FORMATS, load_items, read_data

DATA = Path(__file__).resolve().parents[2] / "studies" / "data"

WINOGRANDE = [
    {"qID": "3QH-1", "sentence": "The trophy doesn't fit into the brown suitcase because the _ is too large.",
     "option1": "trophy", "option2": "suitcase", "answer": "1"},
    {"qID": "3QH-2", "sentence": "The trophy doesn't fit into the brown suitcase because the _ is too small.",
     "option1": "trophy", "option2": "suitcase", "answer": "2"},
    {"qID": "5XY-1", "sentence": "_'s car broke down, so Kevin drove Ian to work.", "option1": "Kevin",
     "option2": "Ian", "answer": "2"},
]  # fmt: skip
SENTENCE = "Mark told Pete many lies about himself, which Pete included in his book. He should have been more truthful."
SUPERGLUE = [  # the later candidate first: items list candidates in text order
    {"text": SENTENCE, "target": {"span1_index": 8, "span1_text": "Pete", "span2_index": 13, "span2_text": "He"},
     "idx": 11, "label": False},
    {"text": SENTENCE, "target": {"span1_index": 0, "span1_text": "Mark", "span2_index": 13, "span2_text": "He"},
     "idx": 10, "label": True},
    {"text": "The dog chased the cat up a tree. It waited at the bottom.", "span1_index": 0, "span1_text": "The dog",
     "span2_index": 8, "span2_text": "It", "idx": 12, "label": 1},
]  # fmt: skip
COUNCIL = "The city councilmen refused the demonstrators a permit because they {} violence."
WINOGRAD_WSC = [
    {"text": COUNCIL.format(verb), "pronoun": "they", "pronoun_loc": 63, "quote": f"they {verb} violence",
     "quote_loc": 63, "options": ["The city councilmen", "the demonstrators"], "label": label, "source": "W72"}
    for verb, label in (("feared", 0), ("advocated", 1))
]  # fmt: skip
XML = """<?xml version="1.0" encoding="ISO-8859-1"?>
<collection>
<schema>
<text>
<txt1>
The city councilmen refused the demonstrators a permit because</txt1>
<pron> they </pron>
<txt2> feared violence.
</txt2>
</text>
<quote><quote1></quote1><pron>they </pron><quote2>feared violence</quote2></quote>
<answers>
<answer>The city councilmen </answer>
<answer>the demonstrators </answer>
</answers>
<correctAnswer> A  </correctAnswer>
<source> (Winograd 1972) </source>
</schema>

<schema>
<text>
<txt1>
The city councilmen refused the demonstrators a permit because</txt1>
<pron> they </pron>
<txt2> advocated violence.
</txt2>
</text>
<answers><answer>The city councilmen </answer><answer>the demonstrators </answer></answers>
<correctAnswer> B.  </correctAnswer>
</schema>

<schema>
<text>
<txt1>The older students were bullying the younger ones, so we punished
</txt1>
<pron>them</pron><txt2>.</txt2>
</text>
<answers><answer>The older students </answer><answer>the younger ones </answer></answers>
<correctAnswer>A</correctAnswer>
</schema>
</collection>
"""
DPR = [
    {"sentence": "The bee landed on the flower because it had pollen.", "pronoun": "it",
     "candidates": ["The bee", "the flower"], "label": 1},
    {"sentence": "The bee landed on the flower because it wanted pollen.", "pronoun": "it",
     "candidates": ["The bee", "the flower"], "label": 0},
]  # fmt: skip
DPR_TEXT = (
    "James asked Robert for a favor but he refused .\nhe\nJames,Robert\nRobert\n\n"
    "James asked Robert for a favor but he was refused .\nhe\nJames,Robert\nJames\n"
)


def jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_winogrande_blank_items_keep_their_ids(tmp_path):
    data = read_data(jsonl(tmp_path / "dev.jsonl", WINOGRANDE))
    assert data.format.key == "winogrande"
    items = data.items
    assert [x.id for x in items] == ["3QH-1", "3QH-2", "5XY-1"]
    first = items[0]
    assert (
        first.blank
        and first.pronoun == "_"
        and first.pronoun_char_offset == WINOGRANDE[0]["sentence"].index("_")
    )
    assert first.candidates == ("trophy", "suitcase") and [x.answer for x in items] == [0, 1, 1]
    assert first.candidate_char_offsets == (4, 38)  # "trophy", "suitcase" found before the blank
    # neighbours that differ in one word are twins; the switch is that word
    assert (first.twin_id, items[1].twin_id, items[2].twin_id) == ("3QH-2", "3QH-1", None)
    assert (first.switch_word, items[1].switch_word) == ("large", "small")
    assert first.schema_id == items[1].schema_id == "3QH-1"
    assert items[2].candidate_char_offsets == (None, None)  # both options come after the blank
    assert data.notes.ids == {"candidate_missing": ["5XY-1"]}


def test_superglue_rows_with_two_candidates_become_one_item(tmp_path):
    data = read_data(jsonl(tmp_path / "val.jsonl", SUPERGLUE))
    assert data.format.key == "superglue-wsc"
    (item,) = data.items
    assert item.id == "10+11" and item.candidates == ("Mark", "Pete") and item.answer == 0
    assert item.pronoun == "He" and item.sentence[item.pronoun_char_offset :].startswith("He should")
    assert item.candidate_char_offsets == (0, SENTENCE.index("Pete included"))  # nearest mention of "Pete"
    assert data.notes.ids == {"superglue_single": ["12"], "candidate_repeated": ["10+11"]}


def test_winograd_wsc_json_and_xml_give_the_same_items(tmp_path):
    from_json = read_data(jsonl(tmp_path / "wsc273.jsonl", WINOGRAD_WSC))
    xml = tmp_path / "WSCollection.xml"
    xml.write_bytes(XML.encode("latin-1"))
    from_xml = read_data(xml)
    assert (from_json.format.key, from_xml.format.key) == ("winograd-wsc", "wsc-xml")
    for a, b in zip(from_json.items, from_xml.items[:2], strict=True):
        assert (a.id, a.sentence, a.pronoun_char_offset, a.candidates, a.answer) == (
            b.id, b.sentence, b.pronoun_char_offset, b.candidates, b.answer)  # fmt: skip
    items = from_xml.items
    assert [x.id for x in items] == ["0", "1", "2"] and [x.answer for x in items] == [0, 1, 0]
    assert [x.line for x in items] == [n for n, line in enumerate(XML.splitlines(), 1) if line == "<schema>"]
    # parts joined by single spaces, as the Hugging Face winograd_wsc script joins them
    assert items[2].sentence == "The older students were bullying the younger ones, so we punished them ."
    assert (items[0].twin_id, items[1].twin_id, items[2].twin_id) == ("1", "0", None)
    assert (items[0].switch_word, items[0].switch_char_offset) == ("feared", 68)


def test_dpr_json_and_text(tmp_path):
    data = read_data(jsonl(tmp_path / "dpr.jsonl", DPR))
    assert data.format.key == "dpr" and [x.id for x in data.items] == ["0", "1"]
    assert data.items[0].pronoun_char_offset == DPR[0]["sentence"].index(" it ") + 1
    assert [x.answer for x in data.items] == [1, 0] and data.items[0].twin_id == "1"
    path = tmp_path / "train.c.txt"
    path.write_text(DPR_TEXT)
    text = read_data(path)
    assert text.format.key == "dpr-text" and [x.answer for x in text.items] == [1, 0]
    assert [x.line for x in text.items] == [1, 6]
    # "he refused" / "he was refused": the first lacks the word its twin adds, so only the twin has a switch
    assert (text.items[0].switch_word, text.items[1].switch_word) == (None, "was")
    assert text.notes.ids == {"insertion": ["0"]}


def test_format_can_be_forced(tmp_path):
    path = jsonl(tmp_path / "dev.jsonl", WINOGRANDE)
    assert [x.id for x in load_items(path, format="winogrande")] == ["3QH-1", "3QH-2", "5XY-1"]
    with pytest.raises(
        ValueError, match=rf"{path}:1: item '3QH-1': a SuperGLUE WSC line is missing field\(s\) text"
    ):
        load_items(path, format="superglue-wsc")
    with pytest.raises(ValueError, match="unknown data format 'wino'"):
        load_items(path, format="wino")
    assert set(FORMATS) >= {"resolution", "agreement", "winogrande", "superglue-wsc", "winograd-wsc", "wsc-xml",
                            "dpr", "dpr-text"}  # fmt: skip


def _strip(rows: list[dict], fields: tuple[str, ...]) -> list[dict]:
    out = []
    for row in rows:
        row = {k: v for k, v in row.items() if k not in fields}
        if row.get("distractor", "") is None:
            del row["distractor"]
        out.append(row)
    return out


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("winograd", ("schema_id", "candidate_char_offsets", "switch_word", "switch_char_offset")),
        ("agreement", ("schema_id", "distractor_char_offset")),
    ],
)
def test_minimal_fields_derive_the_shipped_ones(tmp_path, name, fields):
    rows = [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()]
    minimal = read_data(jsonl(tmp_path / "minimal.jsonl", _strip(rows, fields)))
    full = load_items(name)
    assert minimal.format.key == ("resolution" if name == "winograd" else "agreement")
    assert not minimal.notes.ids
    by_schema = {}
    for a, b in zip(full, minimal.items, strict=True):
        assert a.id == b.id and a.twin_id == b.twin_id
        by_schema.setdefault(a.schema_id, set()).add(b.schema_id)
        if name == "agreement":
            assert (a.distractor, a.distractor_char_offset) == (b.distractor, b.distractor_char_offset)
            continue
        assert a.candidate_char_offsets == b.candidate_char_offsets
        if a.id.startswith(
            "wg-090"
        ):  # "too clever" / "too young": the shared "too" is not part of the difference
            assert (b.switch_word, b.switch_char_offset) == (a.switch_word[4:], a.switch_char_offset + 4)
        else:
            assert (a.switch_word, a.switch_char_offset) == (b.switch_word, b.switch_char_offset)
    assert all(
        len(derived) == 1 for derived in by_schema.values()
    )  # the same schemas, named by their first id


# --- bad files: refused with file, line, id and rule, before any model work -----------------------------------

BAD = [
    # (file name, content, the words the message must hold)
    ("dev.jsonl", [WINOGRANDE[0], "{not json"], [":2:", "not valid JSON"]),
    ("dev.jsonl", [WINOGRANDE[0], {**WINOGRANDE[1], "answer": "3"}],
     [":2: item '3QH-2'", "answer '3' is out of range"]),
    ("dev.jsonl", [{**WINOGRANDE[0], "answer": ""}], [":1: item '3QH-1'", "unlabelled test split"]),
    ("dev.jsonl", [{**WINOGRANDE[0], "sentence": "No blank here."}], [":1: item '3QH-1'", "holds 0"]),
    ("wsc.jsonl", [WINOGRAD_WSC[0], {**WINOGRAD_WSC[1], "pronoun_loc": 60}],
     [":2: item '1'", "pronoun 'they' is not at offset 60", "it occurs at 63"]),
    ("wsc.jsonl", [{**WINOGRAD_WSC[0], "label": 2}], [":1: item '0'", "answer 2 is out of range"]),
    ("val.jsonl", [SUPERGLUE[1], {**SUPERGLUE[0], "target": {**SUPERGLUE[0]["target"], "span1_index": 3}}],
     [":2: item '11'", "span1_text 'Pete' is not at word 3 (found 'many')"]),
    ("dpr.jsonl", [{**DPR[0], "pronoun": "she"}], [":1: item '0'", "pronoun 'she' does not occur"]),
    ("mixed.jsonl", [WINOGRANDE[0], WINOGRANDE[1], SUPERGLUE[1]],
     [":3: item '10'", "reads as SuperGLUE WSC JSONL", "a file holds one kind only"]),
    ("empty.jsonl", ["", "  "], ["no items (the file is empty)"]),
    ("bad.xml", "<collection><schema><text>", ["not well-formed XML"]),
    ("bad.xml", XML.replace("<correctAnswer>A</correctAnswer>", "<correctAnswer>C</correctAnswer>"),
     [":32: item '2'", "<correctAnswer> 'C' is out of range"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "content", "words"), BAD, ids=[b[2][-1] for b in BAD])
def test_bad_file_is_refused_with_file_line_id_and_rule(tmp_path, name, content, words):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        jsonl(path, content)
    with pytest.raises(ValueError) as info:
        load_items(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message, message


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_items(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match="is a folder"):
        load_items(tmp_path)
