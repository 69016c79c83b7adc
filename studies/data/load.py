"""The coreference study's data: loading any supported file into validated items, pairing and splits.

A *resolution* item is a sentence with a pronoun (or a WinoGrande blank) and two candidate antecedents; its
twin, when it has one, swaps a word (the switch) and with it the referent. An *agreement* item is a prompt
that stops right before a pronoun; its twin swaps the antecedent for one of another gender or number. Files
come in the study's own JSONL formats (only the fields that say what an item is are required) or as standard
benchmarks (WinoGrande, SuperGLUE WSC, the WSC XML and ``winograd_wsc`` JSONL, DPR), told apart by their
fields. ``studies/data/README.md`` documents every format field by field.

Loading always validates: reading (:mod:`~studies.data.formats`), filling in what can be derived
(:mod:`~studies.data.derive`) and checking the rules (:mod:`~studies.data.rules`). A bad file
raises ``ValueError`` naming the file, line, id and broken rule; imperfect but usable items are noted by kind
(:mod:`~studies.data.notes`) and left out only of the analyses they cannot serve.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from studies.data.derive import derive
from studies.data.formats import FORMATS, Format, parse
from studies.data.items import AgreementItem, Item, ResolutionItem
from studies.data.notes import Notes
from studies.data.rules import validate
from studies.data.twins import twin_pairs

SHIPPED = {"winograd": "winograd.jsonl", "agreement": "agreement.jsonl"}
"""Names of the data sets that ship with the package, and their files under ``studies/data``."""

FILE_KINDS = frozenset({"superglue_single", "superglue_labels"})
"""Note kinds about rows of the file that did not become items (they stay when a subset is taken)."""


@dataclass
class DataSet:
    """One data file, read: its items and what was noted about them.

    Attributes:
        name: how it was asked for (a shipped name or the path as given).
        path: the file that was read.
        format: the format it was read as.
        items: validated items, every derivable field filled in.
        notes: imperfect items by kind (:class:`~studies.data.notes.Notes`).
    """

    name: str
    path: Path
    format: Format
    items: list[Item]
    notes: Notes

    @property
    def kind(self) -> str:
        return self.items[0].kind

    def warn(self, label: str) -> None:
        """One warning per kind of noted problem, pointing at the file and the line of its first item."""
        source = self.items[0].source if self.items else self.name
        self.notes.warn(label, source, {item.id: item.line for item in self.items})

    def subset(self, items: list[Item]) -> DataSet:
        """The same data set restricted to ``items`` (its notes to theirs)."""
        ids = {item.id for item in items}
        kept = {k: [i for i in v if k in FILE_KINDS or i in ids] for k, v in self.notes.ids.items()}
        notes = Notes({k: v for k, v in kept.items() if v}, dict(self.notes.lines))
        return DataSet(self.name, self.path, self.format, items, notes)


def data_path(name: str | os.PathLike[str]) -> Path:
    """The file a ``--data`` argument names: a shipped data set's file inside the package, or the path."""
    if isinstance(name, str) and name in SHIPPED:
        return Path(str(resources.files("studies").joinpath("data", SHIPPED[name])))
    return Path(name)


def read_data(name: str | os.PathLike[str], format: str | None = None) -> DataSet:
    """Read, derive and validate a data set: a shipped one by name or a file of any supported format.

    Args:
        name: ``"winograd"``, ``"agreement"`` or a path (relative or absolute).
        format: a key of :data:`~studies.data.formats.FORMATS` to read a path as; ``None`` tells it
            from the fields. Shipped data sets are always read in their own format.

    Raises:
        FileNotFoundError: neither a shipped name nor an existing file.
        ValueError: the file cannot be read or its items break a rule; the message names file, line and id.
    """
    shipped = isinstance(name, str) and name in SHIPPED
    path = data_path(name)
    if shipped:
        source, raw = SHIPPED[str(name)], path.read_bytes()
    else:
        if not path.is_file():
            names = ", ".join(map(repr, SHIPPED))
            what = "is a folder" if path.is_dir() else "does not exist"
            raise FileNotFoundError(f"no data set {str(name)!r} ({what}): give a data file or one of {names}")
        source, raw = str(path), path.read_bytes()
    read = parse(raw, source, None if shipped else format)
    notes = Notes()
    for kind, item_id, line in read.notes:
        notes.add(kind, item_id, line)
    items = derive(read.items, read.format.twins_given, notes)
    validate(items)
    return DataSet(str(name), path, read.format, items, notes)


def load_items(path_or_name: str | os.PathLike[str], format: str | None = None) -> list[Item]:
    """Load and validate a data set (see :func:`read_data`) and return its items.

    >>> [item.id for item in load_items("winograd")[:2]]
    ['wg-001a', 'wg-001b']
    """
    return read_data(path_or_name, format).items


def split_by_schema(
    items: Sequence[Item], fraction: float = 0.5, seed: int = 0
) -> tuple[list[Item], list[Item]]:
    """Split items into two parts by schema, so twins land together; the same seed gives the same split.

    ``round(fraction * n_schemas)`` schemas, drawn with ``random.Random(seed)`` from the sorted schema ids, go
    to the first part. Both parts keep the input order.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be between 0 and 1, got {fraction}")
    schema_ids = sorted({item.schema_id or item.id for item in items})
    random.Random(seed).shuffle(schema_ids)
    first = set(schema_ids[: round(fraction * len(schema_ids))])
    return (
        [i for i in items if (i.schema_id or i.id) in first],
        [i for i in items if (i.schema_id or i.id) not in first],
    )


__all__ = [
    "FORMATS",
    "SHIPPED",
    "AgreementItem",
    "DataSet",
    "Item",
    "ResolutionItem",
    "data_path",
    "load_items",
    "read_data",
    "split_by_schema",
    "twin_pairs",
    "validate",
]
