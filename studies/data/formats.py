"""Reading coreference files: the format is told from the fields (or forced), and every line becomes an item.

The study's own JSONL formats (resolution and agreement items) need only the fields that say what an item
is; standard benchmark files are read by :mod:`studies.data.benchmarks`. A line that cannot be read
raises ``ValueError`` naming the file, the line, the item's id and what was wrong, before anything else
happens; rules that span items (offsets, twins) are checked afterwards by :mod:`studies.data.rules`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from studies.data import benchmarks
from studies.data.items import AgreementItem, Item, ResolutionItem, place

_NULL = type(None)

# field name -> accepted JSON types; a tuple field is a list in JSON
REQUIRED: dict[type, dict[str, tuple[type, ...]]] = {
    ResolutionItem: {
        "id": (str,),
        "sentence": (str,),
        "pronoun": (str,),
        "pronoun_char_offset": (int,),
        "candidates": (list,),
        "answer": (int,),
    },
    AgreementItem: {
        "id": (str,),
        "prompt": (str,),
        "targets": (list,),
        "answer": (int,),
        "antecedent": (str,),
        "antecedent_char_offset": (int,),
    },
}
OPTIONAL: dict[type, dict[str, tuple[type, ...]]] = {
    ResolutionItem: {
        "twin_id": (str, _NULL),
        "schema_id": (str, _NULL),
        "candidate_char_offsets": (list, _NULL),
        "switch_word": (str, _NULL),
        "switch_char_offset": (int, _NULL),
    },
    AgreementItem: {
        "twin_id": (str, _NULL),
        "schema_id": (str, _NULL),
        "distractor": (str, _NULL),
        "distractor_char_offset": (int, _NULL),
    },
}
_ELEMENTS = {"candidates": str, "candidate_char_offsets": int, "targets": str}


@dataclass(frozen=True)
class Format:
    """A file format: its name in messages and reports, and how one JSON line becomes an item."""

    key: str
    title: str
    twins_given: bool
    from_record: Callable[[dict, str, int, int, list], Any] | None = None


@dataclass
class Read:
    """What reading a file gave: its format, its items, and problems that left rows out."""

    format: Format
    items: list[Item]
    notes: list[tuple[str, str, int | None]] = field(default_factory=list)  # (kind, id, line)


def _typed(record: dict, where: str, name: str, types: tuple[type, ...]) -> Any:
    value = record[name]
    if isinstance(value, bool) or not isinstance(value, types):
        wanted = " or ".join("null" if t is _NULL else t.__name__ for t in types)
        raise ValueError(f"{where}: field {name!r} should be {wanted}, got {value!r}")
    if name in _ELEMENTS and value is not None:
        element = _ELEMENTS[name]
        if any(isinstance(v, bool) or not isinstance(v, element) for v in value):
            raise ValueError(f"{where}: field {name!r} should hold {element.__name__} values, got {value!r}")
        value = tuple(value)
    return value


def own_item(cls: type, record: dict, source: str, line: int) -> Item:
    """One item of the study's own format, checking field names and types; absent fields are derived."""
    where = place(source, line, record.get("id"))
    required, optional = REQUIRED[cls], OPTIONAL[cls]
    missing = [name for name in required if name not in record]
    if missing:
        raise ValueError(f"{where}: {cls.kind} item is missing field(s) {', '.join(missing)}")
    unknown = sorted(set(record) - set(required) - set(optional))
    if unknown:
        names = ", ".join([*required, *(f"{n} (optional)" for n in optional)])
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}; a {cls.kind} item has {names}")
    values = {name: _typed(record, where, name, types) for name, types in required.items()}
    values |= {name: _typed(record, where, name, types) for name, types in optional.items() if name in record}
    derived = {name for name in optional if values.get(name) is None}
    if cls is AgreementItem:
        # a null distractor offset is a statement ("no distractor"); only an absent one is looked for
        derived.discard("distractor")
        if "distractor_char_offset" in record or values.get("distractor") is None:
            derived.discard("distractor_char_offset")
    return cls(**values, source=source, line=line, derived=frozenset(derived))


def _resolution(record: dict, source: str, line: int, n: int, notes: list) -> Item:
    return own_item(ResolutionItem, record, source, line)


def _agreement(record: dict, source: str, line: int, n: int, notes: list) -> Item:
    return own_item(AgreementItem, record, source, line)


FORMATS: dict[str, Format] = {
    "resolution": Format("resolution", "resolution JSONL (this study's format)", True, _resolution),
    "agreement": Format("agreement", "agreement JSONL (this study's format)", True, _agreement),
    "winogrande": Format("winogrande", "WinoGrande JSONL", False, benchmarks.winogrande_item),
    "superglue-wsc": Format("superglue-wsc", "SuperGLUE WSC JSONL", False, benchmarks.superglue_row),
    "winograd-wsc": Format(
        "winograd-wsc",
        "winograd_wsc JSONL (the Hugging Face wsc273/wsc285 fields)",
        False,
        benchmarks.wsc_json_item,
    ),
    "dpr": Format("dpr", "DPR (definite pronoun resolution) JSONL", False, benchmarks.dpr_item),
    "wsc-xml": Format("wsc-xml", "Winograd Schema Challenge XML (WSCollection.xml)", False),
    "dpr-text": Format("dpr-text", "DPR text (four lines per item)", False),
}
"""Every format ``--format`` accepts, by key."""


def detect(record: Any, source: str, line: int) -> Format:
    """The format of one decoded JSON line, told from its fields."""
    if not isinstance(record, dict):
        raise ValueError(f"{source}:{line}: expected a JSON object, got {type(record).__name__}")
    keys = set(record)
    if "prompt" in keys:
        return FORMATS["agreement"]
    if keys & {"option1", "option2"}:
        return FORMATS["winogrande"]
    if "text" in keys and keys & {"target", "span2_index"}:
        return FORMATS["superglue-wsc"]
    if "text" in keys and "pronoun_loc" in keys:
        return FORMATS["winograd-wsc"]
    if {"sentence", "label"} <= keys and not keys & {"answer", "pronoun_char_offset"}:
        return FORMATS["dpr"]
    if "sentence" in keys:
        return FORMATS["resolution"]
    raise ValueError(
        f"{place(source, line, record.get('id'))}: cannot tell the kind: a resolution item has 'sentence', an "
        "agreement item 'prompt', WinoGrande 'option1'/'option2', SuperGLUE WSC 'text' and 'target', "
        "winograd_wsc 'text' and 'pronoun_loc', DPR 'sentence', 'candidates' and 'label'"
    )


def _json_lines(text: str, source: str) -> list[tuple[int, Any]]:
    rows = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            rows.append((line, json.loads(raw)))
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{source}:{line}: not valid JSON ({error.msg} at column {error.colno})"
            ) from None
    return rows


def parse(data: bytes | str, source: str, format: str | None = None) -> Read:
    """Read a whole file (bytes or text) into items, detecting its format unless ``format`` names one."""
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown data format {format!r}; choose one of {', '.join(FORMATS)}")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    head = raw.lstrip()[:1]
    if format == "wsc-xml" or (format is None and head == b"<"):
        items = benchmarks.read_wsc_xml(raw, source)
        return Read(FORMATS["wsc-xml"], _nonempty(items, source))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{source}: not UTF-8 text (byte {error.start}); give a UTF-8 JSONL file") from None
    if not text.strip():
        raise ValueError(f"{source}: no items (the file is empty)")
    if format == "dpr-text" or (format is None and benchmarks.looks_like_dpr_text(text)):
        items, notes = benchmarks.read_dpr_text(text, source)
        return Read(FORMATS["dpr-text"], _nonempty(items, source), notes)
    rows = _json_lines(text, source)
    first: Format | None = None
    items: list[Item] = []
    notes: list[tuple[str, str, int | None]] = []
    for n, (line, record) in enumerate(rows):
        found = detect(record, source, line) if format is None else FORMATS[format]
        if not isinstance(record, dict):
            raise ValueError(f"{source}:{line}: expected a JSON object, got {type(record).__name__}")
        if first is None:
            first = found
        elif found is not first:
            raise ValueError(
                f"{place(source, line, benchmarks.record_id(record, n))}: reads as {found.title}, but "
                f"{place(source, rows[0][0], benchmarks.record_id(rows[0][1], 0))} reads as {first.title}; "
                "a file holds one kind only"
            )
        assert first.from_record is not None
        items.append(first.from_record(record, source, line, n, notes))
    assert first is not None
    if first.key == "superglue-wsc":
        items, grouped = benchmarks.group_superglue(items, source)  # type: ignore[arg-type]
        notes += grouped
    return Read(first, _nonempty(items, source), notes)


def _nonempty(items: list[Item], source: str) -> list[Item]:
    if not items:
        raise ValueError(f"{source}: no items (the file is empty)")
    return items
