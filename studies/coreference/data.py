"""The coreference study's data: two kinds of twin items, their loader, validation, pairing and splits.

Every item has a twin that differs from it in one short region and whose correct answer is the other one,
so a study can compare the two forward passes and attribute the difference to that region alone. A
*resolution* item is a sentence with a pronoun and two candidate antecedents; its twin swaps one word (the
switch) and with it the referent. An *agreement* item is a prompt that stops right before a pronoun; its twin
swaps the antecedent for one of another gender or number, so the correct next pronoun flips.
``studies/data/README.md`` documents both JSONL formats field by field.

Loading always validates: offsets must point at the text they name, twins must point at each other, differ
only where they should and disagree on the answer. A bad line raises ``ValueError`` with its file, line number
and id.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

SHIPPED = {"winograd": "winograd.jsonl", "agreement": "agreement.jsonl"}
"""Names of the data sets that ship with the package, and their files under ``studies/data``."""

_MAX_REPORTED = 20


@dataclass(frozen=True, kw_only=True)
class ResolutionItem:
    """A sentence whose pronoun refers to one of two candidates; the twin's switch word flips which one.

    Example: "The truck passed the bicycle because it was much faster." (it = the truck, answer 0); its twin
    ends "... much slower." (it = the bicycle, answer 1).
    """

    kind: ClassVar[str] = "resolution"

    id: str
    schema_id: str
    twin_id: str
    sentence: str
    pronoun: str
    pronoun_char_offset: int
    candidates: tuple[str, str]
    candidate_char_offsets: tuple[int, int]
    answer: int
    switch_word: str
    switch_char_offset: int
    source: str = field(default="<memory>", compare=False, repr=False)
    line: int | None = field(default=None, compare=False, repr=False)

    @property
    def referent(self) -> str:
        """The candidate the pronoun refers to."""
        return self.candidates[self.answer]

    @property
    def other(self) -> str:
        """The candidate the pronoun does not refer to."""
        return self.candidates[1 - self.answer]


@dataclass(frozen=True, kw_only=True)
class AgreementItem:
    """A prompt that ends right before a pronoun; ``targets[answer]`` agrees with the antecedent.

    Example: "Emma is coming to the party tonight, isn't" with targets (" she", " he") and answer 0; its twin
    reads "Jack is ..." with answer 1.
    """

    kind: ClassVar[str] = "agreement"

    id: str
    schema_id: str
    twin_id: str
    prompt: str
    targets: tuple[str, ...]
    answer: int
    antecedent: str
    antecedent_char_offset: int
    distractor: str | None
    distractor_char_offset: int | None
    source: str = field(default="<memory>", compare=False, repr=False)
    line: int | None = field(default=None, compare=False, repr=False)

    @property
    def target(self) -> str:
        """The correct next pronoun, with its leading space."""
        return self.targets[self.answer]

    @property
    def foils(self) -> tuple[str, ...]:
        """The competing pronouns that are wrong here."""
        return tuple(t for i, t in enumerate(self.targets) if i != self.answer)


Item = ResolutionItem | AgreementItem

# field name -> accepted JSON types; a tuple field is a list in JSON
_SCHEMAS: dict[type, dict[str, tuple[type, ...]]] = {
    ResolutionItem: {
        "id": (str,),
        "schema_id": (str,),
        "twin_id": (str,),
        "sentence": (str,),
        "pronoun": (str,),
        "pronoun_char_offset": (int,),
        "candidates": (list,),
        "candidate_char_offsets": (list,),
        "answer": (int,),
        "switch_word": (str,),
        "switch_char_offset": (int,),
    },
    AgreementItem: {
        "id": (str,),
        "schema_id": (str,),
        "twin_id": (str,),
        "prompt": (str,),
        "targets": (list,),
        "answer": (int,),
        "antecedent": (str,),
        "antecedent_char_offset": (int,),
        "distractor": (str, type(None)),
        "distractor_char_offset": (int, type(None)),
    },
}
_ELEMENTS = {"candidates": str, "candidate_char_offsets": int, "targets": str}


def _where(item: Item) -> str:
    """``file:line: item 'id'``, the prefix of every error message about an item."""
    return _place(item.source, item.line, item.id)


def _place(source: str, line: int | None, item_id: Any = None) -> str:
    place = f"{source}:{line}" if line is not None else source
    return f"{place}: item {item_id!r}" if item_id is not None else place


def _item_from_record(record: Any, source: str, line: int) -> Item:
    """Build one item from a decoded JSON line, checking field names and types."""
    if not isinstance(record, dict):
        raise ValueError(f"{source}:{line}: expected a JSON object, got {type(record).__name__}")
    where = _place(source, line, record.get("id"))
    if "sentence" in record:
        cls: type = ResolutionItem
    elif "prompt" in record:
        cls = AgreementItem
    else:
        raise ValueError(
            f"{where}: cannot tell the kind: a resolution item has 'sentence', an agreement item 'prompt'"
        )
    schema = _SCHEMAS[cls]
    missing = [name for name in schema if name not in record]
    if missing:
        raise ValueError(f"{where}: {cls.kind} item is missing field(s) {', '.join(missing)}")
    unknown = sorted(set(record) - set(schema))
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {', '.join(unknown)}; a {cls.kind} item has {', '.join(schema)}"
        )
    values: dict[str, Any] = {}
    for name, types in schema.items():
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise ValueError(f"{where}: field {name!r} should be {wanted}, got {value!r}")
        if name in _ELEMENTS:
            element = _ELEMENTS[name]
            if any(isinstance(v, bool) or not isinstance(v, element) for v in value):
                raise ValueError(
                    f"{where}: field {name!r} should hold {element.__name__} values, got {value!r}"
                )
            value = tuple(value)
        values[name] = value
    return cls(**values, source=source, line=line)


def read_jsonl(path: str | os.PathLike[str], source: str | None = None) -> list[Item]:
    """Parse a JSONL file into items without the cross-item checks; ``load_items`` is what users call."""
    text = Path(path).read_text(encoding="utf-8")
    return _parse(text, source or str(path))


def _parse(text: str, source: str) -> list[Item]:
    items: list[Item] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{source}:{line}: not valid JSON ({error.msg} at column {error.colno})"
            ) from None
        items.append(_item_from_record(record, source, line))
    if not items:
        raise ValueError(f"{source}: no items (the file is empty)")
    return items


def load_items(path_or_name: str | os.PathLike[str]) -> list[Item]:
    """Load and validate a data set: a shipped one by name (``"winograd"``, ``"agreement"``) or a JSONL path.

    The kind of item (resolution or agreement) is read from the fields; all lines of a file must be one kind.

    Raises:
        FileNotFoundError: neither a shipped name nor an existing file.
        ValueError: a line is malformed or the items break a rule; the message names file, line and id.
    """
    if isinstance(path_or_name, str) and path_or_name in SHIPPED:
        resource = resources.files("studies").joinpath("data", SHIPPED[path_or_name])
        items = _parse(resource.read_text(encoding="utf-8"), SHIPPED[path_or_name])
    else:
        path = Path(path_or_name)
        if not path.is_file():
            names = ", ".join(map(repr, SHIPPED))
            raise FileNotFoundError(f"no data set {str(path_or_name)!r}: give a JSONL file or one of {names}")
        items = _parse(path.read_text(encoding="utf-8"), str(path))
    validate(items)
    return items


def _at(text: str, offset: int, piece: str) -> bool:
    return 0 <= offset and text[offset : offset + len(piece)] == piece


def _whole_word(text: str, offset: int, piece: str) -> bool:
    end = offset + len(piece)
    return (offset == 0 or not text[offset - 1].isalnum()) and (end == len(text) or not text[end].isalnum())


def _span_problems(text: str, offset: int, piece: str, name: str) -> list[str]:
    """Problems with ``piece`` claimed to sit at ``offset`` in ``text``."""
    if not piece:
        return [f"{name} is empty"]
    if not _at(text, offset, piece):
        found = text[offset : offset + len(piece)] if 0 <= offset < len(text) else "<out of range>"
        hint = f"it occurs at {text.find(piece)}" if piece in text else "it does not occur in the text"
        return [f"{name} {piece!r} is not at offset {offset} (found {found!r}); {hint}"]
    if not _whole_word(text, offset, piece):
        return [f"{name} {piece!r} at offset {offset} is part of a longer word"]
    return []


def _resolution_problems(item: ResolutionItem) -> list[str]:
    s = item.sentence
    problems = _span_problems(s, item.pronoun_char_offset, item.pronoun, "pronoun")
    problems += _span_problems(s, item.switch_char_offset, item.switch_word, "switch_word")
    if len(item.candidates) != 2 or len(item.candidate_char_offsets) != 2:
        return problems + ["candidates and candidate_char_offsets must hold exactly two entries each"]
    if item.candidates[0] == item.candidates[1]:
        problems.append(f"the two candidates are the same, {item.candidates[0]!r}")
    for candidate, offset in zip(item.candidates, item.candidate_char_offsets, strict=True):
        found = _span_problems(s, offset, candidate, "candidate")
        problems += found
        if not found and offset + len(candidate) > item.pronoun_char_offset:
            problems.append(f"candidate {candidate!r} does not come before the pronoun (offset {offset})")
    spans = [(item.pronoun_char_offset, item.pronoun)]
    spans += list(zip(item.candidate_char_offsets, item.candidates, strict=True))
    s0, s1 = item.switch_char_offset, item.switch_char_offset + len(item.switch_word)
    if any(s0 < offset + len(piece) and offset < s1 for offset, piece in spans):
        problems.append("switch_word overlaps the pronoun or a candidate")
    if item.answer not in (0, 1):
        problems.append(f"answer {item.answer} is out of range; it indexes the two candidates, so 0 or 1")
    return problems


def _agreement_problems(item: AgreementItem) -> list[str]:
    p = item.prompt
    problems = _span_problems(p, item.antecedent_char_offset, item.antecedent, "antecedent")
    if not p or p != p.rstrip():
        problems.append("prompt must end right before the pronoun, without trailing whitespace")
    if len(item.targets) < 2 or len(set(item.targets)) != len(item.targets):
        problems.append(f"targets must be two or more distinct pronouns, got {list(item.targets)!r}")
    for target in item.targets:
        if not target.startswith(" ") or not target.strip() or target != " " + target.strip():
            problems.append(f"target {target!r} must be one word with a single leading space, e.g. ' she'")
    if not 0 <= item.answer < len(item.targets):
        problems.append(f"answer {item.answer} is out of range for {len(item.targets)} targets")
    if (item.distractor is None) != (item.distractor_char_offset is None):
        problems.append("distractor and distractor_char_offset must both be null or both be set")
    elif item.distractor is not None and item.distractor_char_offset is not None:
        found = _span_problems(p, item.distractor_char_offset, item.distractor, "distractor")
        problems += found
        a0, a1 = item.antecedent_char_offset, item.antecedent_char_offset + len(item.antecedent)
        d0, d1 = item.distractor_char_offset, item.distractor_char_offset + len(item.distractor)
        if not found and d0 < a1 and a0 < d1:
            problems.append("distractor overlaps the antecedent")
    return problems


def _differ_only_in(a: str, b: str, offset: int, piece_a: str, piece_b: str) -> bool:
    """Whether ``a`` (with ``piece_a`` at ``offset``) and ``b`` (with ``piece_b`` there) agree elsewhere."""
    return a[:offset] == b[:offset] and a[offset + len(piece_a) :] == b[offset + len(piece_b) :]


def _twin_problems(a: Item, b: Item) -> list[str]:
    """Problems with a twin pair; ``a`` comes first in the file."""
    problems = []
    if b.twin_id != a.id:
        problems.append(f"its twin {b.id!r} points to {b.twin_id!r}, not back to it")
    if a.schema_id != b.schema_id:
        problems.append(f"its twin {b.id!r} has schema_id {b.schema_id!r}, not {a.schema_id!r}")
    if a.answer == b.answer:
        problems.append(f"its twin {b.id!r} has the same answer ({a.answer}); twins must disagree")
    if isinstance(a, ResolutionItem) and isinstance(b, ResolutionItem):
        if a.candidates != b.candidates or a.pronoun != b.pronoun:
            problems.append(f"its twin {b.id!r} has other candidates or another pronoun")
        if a.switch_word == b.switch_word or a.switch_char_offset != b.switch_char_offset:
            problems.append(f"its twin {b.id!r} must have a different switch_word at the same offset")
        elif not _differ_only_in(a.sentence, b.sentence, a.switch_char_offset, a.switch_word, b.switch_word):
            problems.append(f"its twin {b.id!r} differs from it outside the switch region")
    elif isinstance(a, AgreementItem) and isinstance(b, AgreementItem):
        if a.targets != b.targets or a.distractor != b.distractor:
            problems.append(f"its twin {b.id!r} has other targets or another distractor")
        if a.antecedent == b.antecedent or a.antecedent_char_offset != b.antecedent_char_offset:
            problems.append(f"its twin {b.id!r} must have a different antecedent at the same offset")
        elif not _differ_only_in(a.prompt, b.prompt, a.antecedent_char_offset, a.antecedent, b.antecedent):
            problems.append(f"its twin {b.id!r} differs from it outside the antecedent region")
    return problems


def validate(items: Sequence[Item]) -> None:
    """Check every rule of the data format; one ``ValueError`` lists each broken rule with file:line and id.

    Per item: offsets point at the text they name, candidates come before the pronoun, answers are in range.
    Across items: one kind only, unique ids, every item's twin present and pointing back, with the same
    schema_id, the other answer, and text that differs only in the switch (resolution) or antecedent
    (agreement) region.
    """
    if not items:
        raise ValueError("no items to validate")
    kinds = {type(item) for item in items}
    if len(kinds) > 1:
        first = items[0]
        odd = next(item for item in items if type(item) is not type(first))
        raise ValueError(
            f"{_where(odd)}: is a {odd.kind} item, but {_where(first)} is a {first.kind} item; "
            "a file holds one kind only"
        )
    problems: list[str] = []
    by_id: dict[str, Item] = {}
    for item in items:
        where = _where(item)
        if item.id in by_id:
            problems.append(f"{where}: duplicate id, first used at line {by_id[item.id].line}")
            continue
        by_id[item.id] = item
        if not item.id or not item.schema_id:
            problems.append(f"{where}: id and schema_id must not be empty")
        if item.twin_id == item.id:
            problems.append(f"{where}: twin_id points to the item itself")
        check = _resolution_problems if isinstance(item, ResolutionItem) else _agreement_problems
        problems += [f"{where}: {problem}" for problem in check(item)]  # type: ignore[arg-type]
    schema_sizes: dict[str, int] = {}
    for item in by_id.values():
        schema_sizes[item.schema_id] = schema_sizes.get(item.schema_id, 0) + 1
    seen: set[str] = set()
    for item in by_id.values():
        where = _where(item)
        if item.id in seen or item.twin_id == item.id:
            continue
        twin = by_id.get(item.twin_id)
        if twin is None:
            problems.append(f"{where}: twin {item.twin_id!r} is missing")
            continue
        seen.update((item.id, twin.id))
        problems += [f"{where}: {problem}" for problem in _twin_problems(item, twin)]
        if schema_sizes[item.schema_id] != 2:
            problems.append(
                f"{where}: schema {item.schema_id!r} has {schema_sizes[item.schema_id]} items, not 2"
            )
    if problems:
        more = len(problems) - _MAX_REPORTED
        tail = f"\n... and {more} more" if more > 0 else ""
        raise ValueError(
            f"{len(problems)} problem(s) in the data:\n" + "\n".join(problems[:_MAX_REPORTED]) + tail
        )


def twin_pairs(items: Sequence[Item]) -> list[tuple[Item, Item]]:
    """The twin pairs, in order of first appearance, each as (the one that comes first, its twin)."""
    by_id = {item.id: item for item in items}
    pairs, seen = [], set()
    for item in items:
        if item.id in seen:
            continue
        twin = by_id.get(item.twin_id)
        if twin is None:
            raise ValueError(f"{_where(item)}: twin {item.twin_id!r} is missing")
        seen.update((item.id, twin.id))
        pairs.append((item, twin))
    return pairs


def split_by_schema(
    items: Sequence[Item], fraction: float = 0.5, seed: int = 0
) -> tuple[list[Item], list[Item]]:
    """Split items into two parts by schema, so twins land together; the same seed gives the same split.

    ``round(fraction * n_schemas)`` schemas, drawn with ``random.Random(seed)`` from the sorted schema ids, go
    to the first part. Both parts keep the input order.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be between 0 and 1, got {fraction}")
    schema_ids = sorted({item.schema_id for item in items})
    random.Random(seed).shuffle(schema_ids)
    first = set(schema_ids[: round(fraction * len(schema_ids))])
    return [i for i in items if i.schema_id in first], [i for i in items if i.schema_id not in first]


__all__ = [
    "SHIPPED",
    "AgreementItem",
    "Item",
    "ResolutionItem",
    "load_items",
    "read_jsonl",
    "split_by_schema",
    "twin_pairs",
    "validate",
]
