"""Standard pronoun-resolution benchmarks as resolution items: WinoGrande, SuperGLUE WSC, the Winograd Schema
Challenge (XML and the Hugging Face ``winograd_wsc`` fields) and DPR.

Each reader keeps the benchmark's own ids (WinoGrande ``qID``, SuperGLUE ``idx``); a file without ids numbers
its items from 0 in file order, which for the WSC XML and ``winograd_wsc`` is the numbering of the Hugging Face
dataset (``wsc273`` is items 0 to 272). No benchmark file links twins, so :mod:`studies.data.derive`
pairs neighbours that differ in a few words. ``studies/data/README.md`` lists what each field becomes.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

from studies.data.items import BLANK, ResolutionItem, place

DERIVED = frozenset({"schema_id", "twin_id", "candidate_char_offsets", "switch_word", "switch_char_offset"})
"""What a benchmark file never gives: filled in by ``derive``."""


def _need(record: dict, where: str, fields: dict[str, tuple[type, ...]], what: str) -> None:
    missing = [name for name in fields if name not in record]
    if missing:
        raise ValueError(f"{where}: {what} line is missing field(s) {', '.join(missing)}")
    for name, types in fields.items():
        value = record[name]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            wanted = " or ".join(t.__name__ for t in types)
            raise ValueError(f"{where}: field {name!r} should be {wanted}, got {value!r}")


def record_id(record: dict, n: int) -> str:
    """A line's id for messages: its ``id``, ``qID`` or ``idx``, else its number among the file's items."""
    for key in ("id", "qID", "idx"):
        if isinstance(record.get(key), (str, int)) and not isinstance(record.get(key), bool):
            return str(record[key])
    return str(n)


def _id(record: dict, key: str, n: int, where: str) -> str:
    value = record.get(key, n)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{where}: field {key!r} should be a string or an integer id, got {value!r}")
    return str(value)


def _item(**values: Any) -> ResolutionItem:
    return ResolutionItem(**values, derived=DERIVED)


def _two(options: Any, where: str, name: str) -> tuple[str, str]:
    if not isinstance(options, list) or len(options) != 2 or not all(isinstance(o, str) for o in options):
        raise ValueError(f"{where}: field {name!r} should hold two candidate strings, got {options!r}")
    return options[0], options[1]


# --- WinoGrande -------------------------------------------------------------------------------------------


def winogrande_item(record: dict, source: str, line: int, n: int, notes: list) -> ResolutionItem:
    """``sentence`` with one ``_``, ``option1``, ``option2``, ``answer`` "1" or "2", ``qID`` (the id)."""
    where = place(source, line, record_id(record, n))
    _need(record, where, {"sentence": (str,), "option1": (str,), "option2": (str,)}, "a WinoGrande")
    sentence, answer = record["sentence"], record.get("answer")
    if sentence.count(BLANK) != 1:
        raise ValueError(
            f"{where}: a WinoGrande sentence holds one blank '_'; this one holds {sentence.count(BLANK)}"
        )
    if answer not in ("1", "2", 1, 2) or isinstance(answer, bool):
        unlabelled = " (an unlabelled test split cannot be scored)" if answer in ("", None) else ""
        raise ValueError(
            f"{where}: answer {answer!r} is out of range; a WinoGrande answer is '1' (option1) or '2' "
            f"(option2){unlabelled}"
        )
    return _item(
        id=_id(record, "qID", n, where),
        sentence=sentence,
        pronoun=BLANK,
        pronoun_char_offset=sentence.index(BLANK),
        candidates=(record["option1"], record["option2"]),
        answer=int(answer) - 1,
        source=source,
        line=line,
    )


# --- the Winograd Schema Challenge: winograd_wsc JSONL and WSCollection.xml --------------------------------


def wsc_json_item(record: dict, source: str, line: int, n: int, notes: list) -> ResolutionItem:
    """The Hugging Face ``winograd_wsc`` fields: ``text``, ``pronoun``, ``pronoun_loc``, ``options``, ``label``."""
    where = place(source, line, record_id(record, n))
    fields = {"text": (str,), "pronoun": (str,), "pronoun_loc": (int,), "options": (list,), "label": (int,)}
    _need(record, where, fields, "a winograd_wsc")
    return _item(
        id=_id(record, "id" if "id" in record else "idx", n, where),
        sentence=record["text"],
        pronoun=record["pronoun"],
        pronoun_char_offset=record["pronoun_loc"],
        candidates=_two(record["options"], where, "options"),
        answer=record["label"],
        source=source,
        line=line,
    )


def _clean(text: str | None) -> str:
    return " ".join((text or "").split())


def read_wsc_xml(raw: bytes, source: str) -> list[ResolutionItem]:
    """``WSCollection.xml``: each ``<schema>`` gives ``<text>`` (``txt1``, ``pron``, ``txt2``), two
    ``<answer>``s and ``<correctAnswer>`` (``A`` or ``B``, often with a full stop).

    The sentence is built as the Hugging Face ``winograd_wsc`` script builds it (whitespace collapsed, the
    three parts joined by single spaces), so its text, and a score on it, matches that dataset's.
    """
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as error:
        raise ValueError(f"{source}: not well-formed XML ({error})") from None
    starts = [raw.count(b"\n", 0, m.start()) + 1 for m in re.finditer(rb"<schema\b", raw)]
    schemas = root.findall("schema")
    if not schemas:
        raise ValueError(f"{source}: no <schema> elements; a WSCollection.xml holds <collection><schema>...")
    items = []
    for n, schema in enumerate(schemas):
        line = starts[n] if n < len(starts) else None
        where = place(source, line, str(n))
        text = schema.find("text")
        pronoun = _clean(text.findtext("pron")) if text is not None else ""
        if text is None or not pronoun:
            raise ValueError(f"{where}: the schema has no <text> with a <pron>")
        left, right = _clean(text.findtext("txt1")), _clean(text.findtext("txt2"))
        answers = schema.find("answers")
        options = [_clean(a.text) for a in answers.findall("answer")] if answers is not None else []
        if len(options) != 2:
            raise ValueError(f"{where}: the schema has {len(options)} <answer>s; an item needs two")
        correct = _clean(schema.findtext("correctAnswer")).rstrip(".").strip()
        if correct not in ("A", "B"):
            raise ValueError(f"{where}: <correctAnswer> {correct!r} is out of range; it is A or B")
        items.append(
            _item(
                id=str(n),
                sentence=" ".join([left, pronoun, right]).strip(),
                pronoun=pronoun,
                pronoun_char_offset=len(left) + 1 if left else 0,
                candidates=(options[0], options[1]),
                answer="AB".index(correct),
                source=source,
                line=line,
            )
        )
    return items


# --- SuperGLUE WSC ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SuperGlueRow:
    """One SuperGLUE WSC line: does the pronoun (span2) refer to the candidate (span1)?"""

    line: int
    idx: str
    text: str
    pronoun: str
    pronoun_offset: int
    candidate: str
    candidate_offset: int
    label: bool


def _word_offset(text: str, index: int, span: str, where: str, name: str) -> tuple[int, str]:
    """Character offset and text of a span given by its word index (words split at whitespace)."""
    words = [m.start() for m in re.finditer(r"\S+", text)]
    if not 0 <= index < len(words):
        raise ValueError(f"{where}: {name}_index {index} is out of range; the text has {len(words)} words")
    offset = words[index]
    found = text[offset : offset + len(span)]
    if found.lower() != span.lower():
        raise ValueError(
            f"{where}: {name}_text {span!r} is not at word {index} (found {found!r}); the index counts "
            "whitespace-separated words from 0"
        )
    return offset, found


def superglue_row(record: dict, source: str, line: int, n: int, notes: list) -> SuperGlueRow:
    """``text``, ``target`` (``span1_index``, ``span1_text``, ``span2_index``, ``span2_text``; or the same at
    the top level, as the Hugging Face ``super_glue`` export has them), ``label``, ``idx``."""
    where = place(source, line, record_id(record, n))
    _need(record, where, {"text": (str,)}, "a SuperGLUE WSC")
    spans = record.get("target", record)
    if not isinstance(spans, dict):
        raise ValueError(f"{where}: field 'target' should be an object with the span fields, got {spans!r}")
    fields = {"span1_index": (int,), "span1_text": (str,), "span2_index": (int,), "span2_text": (str,)}
    _need(spans, where, fields, "a SuperGLUE WSC")
    label = record.get("label")
    if label not in (True, False, 0, 1):
        raise ValueError(
            f"{where}: label {label!r} is out of range; it is true or false (an unlabelled test split cannot "
            "be scored)"
        )
    text = record["text"]
    pronoun_offset, pronoun = _word_offset(text, spans["span2_index"], spans["span2_text"], where, "span2")
    candidate_offset, _ = _word_offset(text, spans["span1_index"], spans["span1_text"], where, "span1")
    idx = _id(record, "idx", n, where)
    return SuperGlueRow(
        line, idx, text, pronoun, pronoun_offset, spans["span1_text"], candidate_offset, bool(label)
    )


def group_superglue(rows: list[SuperGlueRow], source: str) -> tuple[list[ResolutionItem], list]:
    """Rows that share a text and pronoun become one item when they name two candidates, one of them true.

    Other groups cannot be scored by comparing two candidates; they are left out and noted by kind.
    """
    groups: dict[tuple[str, int], list[SuperGlueRow]] = {}
    for row in rows:
        groups.setdefault((row.text, row.pronoun_offset), []).append(row)
    items, notes = [], []
    for group in groups.values():
        by_candidate: dict[str, SuperGlueRow] = {}
        for row in group:
            by_candidate.setdefault(row.candidate.lower(), row)
        named = sorted(by_candidate.values(), key=lambda row: row.candidate_offset)  # in text order
        true = [row for row in named if row.label]
        ids = "+".join(row.idx for row in named)
        if len(named) != 2 or len(true) != 1:
            kind = "superglue_single" if len(named) < 2 else "superglue_labels"
            notes.append((kind, ids, group[0].line))
            continue
        first = group[0]
        items.append(
            _item(
                id=ids,
                sentence=first.text,
                pronoun=first.pronoun,
                pronoun_char_offset=first.pronoun_offset,
                candidates=(named[0].candidate, named[1].candidate),
                answer=named.index(true[0]),
                source=source,
                line=first.line,
            )
        )
    return items, notes


# --- DPR: JSONL (sentence, pronoun, candidates, label) and the original four-line text files ----------------


def _whole_words(text: str, word: str) -> list[int]:
    pattern = rf"(?<![\w]){re.escape(word)}(?![\w])"
    found = [m.start() for m in re.finditer(pattern, text)]
    return found or [m.start() for m in re.finditer(pattern, text, flags=re.IGNORECASE)]


def find_pronoun(sentence: str, pronoun: str, candidates: tuple[str, str], where: str) -> tuple[int, bool]:
    """Where a pronoun given without an offset sits: its first whole-word occurrence after the first mention of
    both candidates (or its first occurrence, when a candidate is not found). Also whether there were more."""
    occurrences = _whole_words(sentence, pronoun)
    if not occurrences:
        raise ValueError(f"{where}: pronoun {pronoun!r} does not occur in the sentence as a word")
    mentions = [_whole_words(sentence, c) for c in candidates]
    after = max((m[0] + len(c) for m, c in zip(mentions, candidates, strict=True) if m), default=0)
    later = [o for o in occurrences if o >= after] or occurrences
    return later[0], len(later) > 1


def _dpr(sentence: str, pronoun: str, candidates: tuple[str, str], answer: int, ids: tuple, notes: list):
    item_id, source, line = ids
    where = place(source, line, item_id)
    offset, several = find_pronoun(sentence, pronoun, candidates, where)
    if several:
        notes.append(("pronoun_repeated", item_id, line))
    return _item(
        id=item_id,
        sentence=sentence,
        pronoun=sentence[offset : offset + len(pronoun)],
        pronoun_char_offset=offset,
        candidates=candidates,
        answer=answer,
        source=source,
        line=line,
    )


def dpr_item(record: dict, source: str, line: int, n: int, notes: list) -> ResolutionItem:
    """The Hugging Face ``definite_pronoun_resolution`` fields: ``sentence``, ``pronoun``, ``candidates``,
    ``label`` (0 or 1); the pronoun's offset is found in the sentence."""
    where = place(source, line, record_id(record, n))
    _need(
        record,
        where,
        {"sentence": (str,), "pronoun": (str,), "candidates": (list,), "label": (int,)},
        "a DPR",
    )
    candidates = _two(record["candidates"], where, "candidates")
    ids = (_id(record, "id", n, where), source, line)
    return _dpr(record["sentence"], record["pronoun"], candidates, record["label"], ids, notes)


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    blocks, current, start = [], [], 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            if not current:
                start = line
            current.append(raw.strip())
        elif current:
            blocks.append((start, current))
            current = []
    if current:
        blocks.append((start, current))
    return blocks


def looks_like_dpr_text(text: str) -> bool:
    """Whether a file is DPR's text format: blocks of four lines (sentence, pronoun, "a,b", answer)."""
    first = text.lstrip()[:1]
    if first in ("{", "["):
        return False
    try:
        json.loads(text.strip().splitlines()[0])
        return False
    except json.JSONDecodeError:
        pass
    blocks = _blocks(text)
    return bool(blocks) and all(len(b) == 4 and "," in b[2] for _, b in blocks)


def read_dpr_text(text: str, source: str) -> tuple[list[ResolutionItem], list]:
    """DPR's original files: per item a sentence, the pronoun, the two candidates joined by a comma and the
    correct candidate, then a blank line. Items are numbered from 0."""
    items, notes = [], []
    for n, (line, block) in enumerate(_blocks(text)):
        where = place(source, line, str(n))
        if len(block) != 4:
            raise ValueError(f"{where}: a DPR item has four lines (sentence, pronoun, candidates, answer)")
        sentence, pronoun, pair, answer = block
        names = [c.strip() for c in pair.split(",")]
        if len(names) != 2:
            raise ValueError(f"{where}: the candidates line {pair!r} should name two, separated by a comma")
        lowered = [c.lower() for c in names]
        if answer.lower() not in lowered:
            raise ValueError(f"{where}: answer {answer!r} is not one of the candidates {names}")
        ids = (str(n), source, line)
        items.append(_dpr(sentence, pronoun, (names[0], names[1]), lowered.index(answer.lower()), ids, notes))
    return items, notes
