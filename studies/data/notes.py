"""Imperfect data, counted by kind: what was found, how many items it touched, and what it costs them.

Real benchmark files do not follow the twin rules this study was built around (WSC273 has a schema of three
sentences, twins that differ in two places, candidates that occur twice; WinoGrande has no twin links). Such
items are kept and left out only of the analyses they cannot serve. Each kind of problem is warned about
once per data set, with its count and a few ids, and listed in the report.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

KINDS: dict[str, tuple[str, str]] = {
    # kind: (what the items have, what follows for them)
    "no_twin": ("have no twin", "left out of pair accuracy, twin patching and the switch position"),
    "one_way": (
        "name a twin that does not name them back (as the third sentence of a schema does)",
        "left out of the pair analyses; their twin's own pair, if it has one, is kept",
    ),
    "same_answer": ("have a twin with the same answer", "the pair is left out of pair accuracy and patching"),
    "other_candidates": (
        "have a twin with other candidates or another pronoun",
        "the pair counts for pair accuracy but is not patched or compared position by position",
    ),
    "regions": (
        "differ from their twin in several places, on both sides of the pronoun or a candidate",
        "no single switch word: left out of attention from the switch",
    ),
    "insertion": (
        "lack the words their twin adds",
        "no switch word of their own: left out of attention from the switch",
    ),
    "switch_overlap": (
        "differ from their twin inside the pronoun or a candidate",
        "no switch position: left out of attention from the switch",
    ),
    "same_text": (
        "have a twin with the same text",
        "no switch position: left out of attention from the switch",
    ),
    "candidate_missing": (
        "have a candidate that does not occur before the pronoun",
        "left out of attention to the candidates",
    ),
    "candidate_repeated": (
        "have a candidate that occurs more than once before the pronoun",
        "its mention nearest the pronoun is its position",
    ),
    "distractor_repeated": (
        "have a distractor that occurs more than once",
        "its first mention outside the antecedent is its position",
    ),
    "pronoun_repeated": (
        "have a pronoun that occurs more than once after the candidates",
        "its first occurrence there is taken as the pronoun",
    ),
    "superglue_single": (
        "name only one candidate for their text and pronoun",
        "left out of the data set: substitution scoring compares two candidates",
    ),
    "superglue_labels": (
        "name more than two candidates, or not exactly one true one, for their text and pronoun",
        "left out of the data set: an item needs two candidates and one answer",
    ),
}


class DataWarning(UserWarning):
    """A data set has imperfect items; the study runs and says which analyses left them out."""


@dataclass
class Notes:
    """Ids of the items that have each kind of problem, in the order found (and, where known, their lines)."""

    ids: dict[str, list[str]] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, item_id: str, line: int | None = None) -> None:
        if kind not in KINDS:
            raise KeyError(f"unknown note kind {kind!r}; known: {', '.join(KINDS)}")
        found = self.ids.setdefault(kind, [])
        if item_id not in found:
            found.append(item_id)
        if line is not None:
            self.lines.setdefault(item_id, line)

    def count(self, kind: str) -> int:
        return len(self.ids.get(kind, ()))

    def sentences(self, examples: int = 3) -> list[str]:
        """One sentence per kind: count, a few ids, and the consequence."""
        out = []
        for kind, ids in self.ids.items():
            have, consequence = KINDS[kind]
            shown = ", ".join(repr(i) for i in ids[:examples]) + (", ..." if len(ids) > examples else "")
            unit = "group(s) of SuperGLUE rows" if kind.startswith("superglue") else "item(s)"
            out.append(f"{len(ids)} {unit} {have} ({shown}): {consequence}.")
        return out

    def warn(self, label: str, source: str = "<data>", lines: dict[str, int | None] | None = None) -> None:
        """One :class:`DataWarning` per kind of problem, shown at the data file's line of its first item
        (``lines``: item id to line, for the items whose line the notes do not hold)."""
        for kind, text in zip(self.ids, self.sentences(), strict=True):
            first = self.ids[kind][0]
            line = self.lines.get(first) or (lines or {}).get(first) or 0
            warnings.warn_explicit(f"{label}: {text}", DataWarning, filename=source, lineno=line)

    def to_dict(self) -> dict[str, dict]:
        return {kind: {"count": len(ids), "ids": ids} for kind, ids in self.ids.items()}
