"""The two kinds of coreference item the study reads, whatever file format they came from.

A *resolution* item is a sentence with a pronoun (or a WinoGrande blank, ``_``) and two candidate
antecedents; an *agreement* item is a prompt that stops right before a pronoun that must agree with an
antecedent. Only the fields that say what an item is are required; the rest (schema, candidate positions,
the switch between twins, a distractor's position) are filled in by :mod:`studies.data.derive` when
the file does not give them, and stay ``None`` when they cannot be found. ``derived`` names the fields that
were filled in, so the strict rules apply to what a file gives and the lenient ones to what was inferred.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

BLANK = "_"
"""The WinoGrande blank, read as the item's pronoun."""


@dataclass(frozen=True, kw_only=True)
class ResolutionItem:
    """A sentence whose pronoun refers to one of two candidates; a twin's switch word flips which one.

    Example: "The truck passed the bicycle because it was much faster." (it = the truck, answer 0); its twin
    ends "... much slower." (it = the bicycle, answer 1).
    """

    kind: ClassVar[str] = "resolution"

    id: str
    sentence: str
    pronoun: str
    pronoun_char_offset: int
    candidates: tuple[str, str]
    answer: int
    schema_id: str | None = None
    twin_id: str | None = None
    candidate_char_offsets: tuple[int | None, int | None] | None = None
    switch_word: str | None = None
    switch_char_offset: int | None = None
    source: str = field(default="<memory>", compare=False, repr=False)
    line: int | None = field(default=None, compare=False, repr=False)
    derived: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def referent(self) -> str:
        """The candidate the pronoun refers to."""
        return self.candidates[self.answer]

    @property
    def other(self) -> str:
        """The candidate the pronoun does not refer to."""
        return self.candidates[1 - self.answer]

    @property
    def blank(self) -> bool:
        """Whether the "pronoun" is a WinoGrande blank (``_``), filled in by substitution."""
        return self.pronoun == BLANK

    @property
    def pronoun_end(self) -> int:
        return self.pronoun_char_offset + len(self.pronoun)

    @property
    def declares_switch(self) -> bool:
        """Whether the file gave the switch (then the twin rules are checked strictly)."""
        return self.switch_word is not None and "switch_word" not in self.derived


@dataclass(frozen=True, kw_only=True)
class AgreementItem:
    """A prompt that ends right before a pronoun; ``targets[answer]`` agrees with the antecedent.

    Example: "Emma is coming to the party tonight, isn't" with targets (" she", " he") and answer 0; its twin
    reads "Jack is ..." with answer 1.
    """

    kind: ClassVar[str] = "agreement"

    id: str
    prompt: str
    targets: tuple[str, ...]
    answer: int
    antecedent: str
    antecedent_char_offset: int
    schema_id: str | None = None
    twin_id: str | None = None
    distractor: str | None = None
    distractor_char_offset: int | None = None
    source: str = field(default="<memory>", compare=False, repr=False)
    line: int | None = field(default=None, compare=False, repr=False)
    derived: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def target(self) -> str:
        """The correct next pronoun, with its leading space."""
        return self.targets[self.answer]

    @property
    def foils(self) -> tuple[str, ...]:
        """The competing pronouns that are wrong here."""
        return tuple(t for i, t in enumerate(self.targets) if i != self.answer)


Item = ResolutionItem | AgreementItem


def text_of(item: Item) -> str:
    """The item's text: the sentence of a resolution item, the prompt of an agreement item."""
    return item.sentence if isinstance(item, ResolutionItem) else item.prompt


def place(source: str, line: int | None, item_id: Any = None) -> str:
    """``file:line: item 'id'``, the prefix of every message about an item."""
    where = f"{source}:{line}" if line is not None else source
    return f"{where}: item {item_id!r}" if item_id is not None else where


def where(item: Item) -> str:
    return place(item.source, item.line, item.id)
