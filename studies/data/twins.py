"""Which twin pairs each analysis can use, and why the other items are left out of them.

A pair is two items that name each other as twins. Pair accuracy (both twins right) needs the twins to have
other answers. Patching one twin's activations into the other, and comparing them position by position,
needs more: the same candidates and pronoun (resolution) or targets (agreement), so that the metric means
the same in both rows. A link that is not returned (the third sentence of a schema) leaves its item out of
the pair analyses only; the item still counts for behaviour, attention and probes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from studies.data.items import Item, ResolutionItem
from studies.data.notes import Notes


@dataclass(frozen=True)
class Pairing:
    """Twin pairs as indices into the items, each ``(first in the file, its twin)``, in file order.

    Attributes:
        pairs: reciprocal twins with other answers (pair accuracy).
        comparable: those of ``pairs`` with the same candidates and pronoun, or targets (patching, twin
            differences).
        aligned: per comparable pair, whether the twins' texts agree up to the end of the pronoun (so a causal
            model's activations there are identical); always ``False`` for agreement items.
    """

    pairs: tuple[tuple[int, int], ...]
    comparable: tuple[tuple[int, int], ...]
    aligned: tuple[bool, ...]

    def paired(self) -> set[int]:
        return {k for pair in self.pairs for k in pair}


def _same_answer(a: Item, b: Item) -> bool:
    if isinstance(a, ResolutionItem) and isinstance(b, ResolutionItem):
        return a.referent.lower() == b.referent.lower()
    return a.answer == b.answer


def _comparable(a: Item, b: Item) -> bool:
    if isinstance(a, ResolutionItem) and isinstance(b, ResolutionItem):
        return a.candidates == b.candidates and a.pronoun == b.pronoun
    return a.targets == b.targets  # type: ignore[union-attr]


def _aligned(a: Item, b: Item) -> bool:
    if not (isinstance(a, ResolutionItem) and isinstance(b, ResolutionItem)):
        return False
    return (
        a.pronoun_char_offset == b.pronoun_char_offset
        and a.sentence[: a.pronoun_end] == b.sentence[: b.pronoun_end]
    )


def pair_up(items: Sequence[Item], notes: Notes) -> Pairing:
    """The pairs each twin analysis can use; items left out are noted by kind."""
    index = {item.id: k for k, item in enumerate(items)}
    pairs, comparable, aligned = [], [], []
    for k, item in enumerate(items):
        j = index.get(item.twin_id) if item.twin_id is not None else None
        if j is None:
            notes.add("no_twin", item.id)
            continue
        twin = items[j]
        if twin.twin_id != item.id:
            notes.add("one_way", item.id)
            continue
        if j < k:
            continue
        if _same_answer(item, twin):
            notes.add("same_answer", item.id)
            notes.add("same_answer", twin.id)
            continue
        pairs.append((k, j))
        if _comparable(item, twin):
            comparable.append((k, j))
            aligned.append(_aligned(item, twin))
        else:
            notes.add("other_candidates", item.id)
            notes.add("other_candidates", twin.id)
    return Pairing(tuple(pairs), tuple(comparable), tuple(aligned))


def twin_pairs(items: Sequence[Item]) -> list[tuple[Item, Item]]:
    """The reciprocal twin pairs, in order of first appearance, each as (the one that comes first, its twin).

    Items whose twin is absent, or whose twin names another item, are not in a pair.
    """
    by_id = {item.id: item for item in items}
    pairs, seen = [], set()
    for item in items:
        twin = by_id.get(item.twin_id) if item.twin_id is not None else None
        if item.id in seen or twin is None or twin.twin_id != item.id:
            continue
        seen.update((item.id, twin.id))
        pairs.append((item, twin))
    return pairs
