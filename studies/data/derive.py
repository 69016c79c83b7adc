"""Filling in what a file does not give: twin links, schemas, candidate positions, the switch, a distractor.

- **Twins** of a benchmark file (no twin ids): neighbours in file order that have the same pronoun, share a
  candidate and differ in at most :data:`MAX_CHANGED_WORDS` words are twins; an item after such a pair that
  differs as little from one of them joins their schema with a one-way link (a schema of three sentences).
- **Schema**: the items linked by twin ids, directly or not, form one schema; its id is the one the file
  gives, or else the id of its first item.
- **Candidate position**: the candidate's whole-word occurrence before the pronoun (its first letter's case
  may differ), the one nearest the pronoun when it occurs more than once; none when it does not occur.
- **Switch**: the stretch of the item's text from the first word where it differs from its twin to the last
  (``"was pulled by"`` against ``"pulled"``), when it is not empty and holds neither the pronoun nor a
  candidate; twins that differ on both sides of the pronoun or a candidate have no switch.
- **Distractor position**: its first whole-word occurrence outside the antecedent.

What cannot be found stays ``None`` and is noted by kind (:mod:`studies.data.notes`).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace

from studies.data.items import AgreementItem, Item, ResolutionItem, text_of
from studies.data.notes import Notes

MAX_CHANGED_WORDS = 3
"""Neighbours in a benchmark file are twins when they differ in at most this many words on either side."""


def _words(text: str) -> list[str]:
    return text.lower().split()


def changed_words(a: str, b: str) -> tuple[int, int]:
    """``(regions, words)``: how many separate places two texts differ in, and the most words changed on
    either side (whitespace-separated words, compared case-blind)."""
    wa, wb = _words(a), _words(b)
    ops = [
        op for op in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    return len(ops), max(sum(i2 - i1 for _, i1, i2, _, _ in ops), sum(j2 - j1 for *_, j1, j2 in ops), 0)


def _could_be_twins(a: Item, b: Item) -> bool:
    if not (isinstance(a, ResolutionItem) and isinstance(b, ResolutionItem)):
        return False
    if a.pronoun.lower() != b.pronoun.lower() or a.sentence == b.sentence:
        return False
    if not {c.lower().strip() for c in a.candidates} & {c.lower().strip() for c in b.candidates}:
        return False
    return 0 < changed_words(a.sentence, b.sentence)[1] <= MAX_CHANGED_WORDS


def link_neighbours(items: list[Item]) -> list[Item]:
    """Twin ids for a file that has none (see the module docstring)."""
    twin: dict[int, int] = {}
    i, n = 0, len(items)
    while i < n:
        if not (i + 1 < n and _could_be_twins(items[i], items[i + 1])):
            i += 1
            continue
        twin[i], twin[i + 1] = i + 1, i
        j = i + 2
        # a third sentence of the schema: close to one of the pair, and not the first of the next pair
        if j < n and not (j + 1 < n and _could_be_twins(items[j], items[j + 1])):
            near = [k for k in (i, i + 1) if _could_be_twins(items[j], items[k])]
            if near:
                twin[j] = min(near, key=lambda k: changed_words(text_of(items[j]), text_of(items[k]))[1])
                j += 1
        i = j
    return [replace(x, twin_id=items[twin[k]].id) if k in twin else x for k, x in enumerate(items)]


def schema_ids(items: list[Item]) -> list[Item]:
    """Every item's schema: the one its linked items give, else the id of the first of them."""
    index = {item.id: k for k, item in enumerate(items)}
    parent = list(range(len(items)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for k, item in enumerate(items):
        if item.twin_id in index:
            a, b = root(k), root(index[item.twin_id])
            parent[max(a, b)] = min(a, b)
    given: dict[int, str] = {}
    for k, item in enumerate(items):
        if item.schema_id is not None and "schema_id" not in item.derived:
            given.setdefault(root(k), item.schema_id)
    out = []
    for k, item in enumerate(items):
        if item.schema_id is None or "schema_id" in item.derived:
            item = replace(item, schema_id=given.get(root(k), items[root(k)].id))
        out.append(item)
    return out


def _occurrences(text: str, piece: str, end: int) -> list[int]:
    """Whole-word occurrences of ``piece`` ending at or before ``end``; the first letter's case may differ."""
    if not piece:
        return []
    found = []
    for variant in dict.fromkeys((piece, piece[:1].swapcase() + piece[1:])):
        pattern = rf"(?<!\w){re.escape(variant)}(?!\w)"
        found += [m.start() for m in re.finditer(pattern, text[:end])]
    return sorted(set(found))


def candidate_offsets(item: ResolutionItem, notes: Notes) -> ResolutionItem:
    offsets = []
    for candidate in item.candidates:
        found = _occurrences(item.sentence, candidate, item.pronoun_char_offset)
        if not found:
            notes.add("candidate_missing", item.id)
        elif len(found) > 1:
            notes.add("candidate_repeated", item.id)
        offsets.append(found[-1] if found else None)
    return replace(item, candidate_char_offsets=(offsets[0], offsets[1]))


def _w(char: str) -> bool:
    return char.isalnum() or char == "'"


def switch_region(item: ResolutionItem, twin: ResolutionItem) -> tuple[int, str] | str:
    """``(offset, words)`` of the item's side of the stretch where it differs from its twin (from the first
    differing word to the last), or the kind of note that says why it has no switch."""
    a, b = item.sentence, twin.sentence
    if a == b:
        return "same_text"
    p = len(_common_prefix(a, b))  # move the stretch's edges out of any word they cut
    while p > 0 and _w(a[p - 1]) and ((p < len(a) and _w(a[p])) or (p < len(b) and _w(b[p]))):
        p -= 1
    s = len(_common_prefix(a[p:][::-1], b[p:][::-1]))
    qa, qb = len(a) - s, len(b) - s
    while s > 0 and _w(a[qa]) and ((qa > p and _w(a[qa - 1])) or (qb > p and _w(b[qb - 1]))):
        s, qa, qb = s - 1, qa + 1, qb + 1
    region = a[p:qa]
    if not region.strip():
        return "insertion"
    start = p + len(region) - len(region.lstrip())
    words = region.strip()
    spans = [(item.pronoun_char_offset, item.pronoun)]
    offsets = item.candidate_char_offsets or ()
    spans += [(o, c) for o, c in zip(offsets, item.candidates, strict=False) if o is not None]
    if any(start < o + len(c) and o < start + len(words) for o, c in spans):
        return "regions" if changed_words(a, b)[0] > 1 else "switch_overlap"
    return start, words


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


def switches(items: list[Item], notes: Notes) -> list[Item]:
    by_id = {item.id: item for item in items}
    out = []
    for item in items:
        derive = isinstance(item, ResolutionItem) and {"switch_word", "switch_char_offset"} <= item.derived
        twin = by_id.get(item.twin_id) if item.twin_id is not None else None
        if derive and isinstance(twin, ResolutionItem):
            found = switch_region(item, twin)  # type: ignore[arg-type]
            if isinstance(found, str):
                notes.add(found, item.id)
            else:
                item = replace(item, switch_char_offset=found[0], switch_word=found[1])
        out.append(item)
    return out


def distractor_offset(item: AgreementItem, notes: Notes) -> AgreementItem:
    if item.distractor is None or "distractor_char_offset" not in item.derived:
        return item
    a0, a1 = item.antecedent_char_offset, item.antecedent_char_offset + len(item.antecedent)
    found = [o for o in _occurrences(item.prompt, item.distractor, len(item.prompt))
             if o + len(item.distractor) <= a0 or o >= a1]  # fmt: skip
    if len(found) > 1:
        notes.add("distractor_repeated", item.id)
    return replace(item, distractor_char_offset=found[0]) if found else item


def derive(items: list[Item], twins_given: bool, notes: Notes) -> list[Item]:
    """Every derivable field filled in; what cannot be found is noted and left ``None``."""
    if not twins_given:
        items = link_neighbours(items)
    items = schema_ids(items)
    items = [
        candidate_offsets(x, notes) if isinstance(x, ResolutionItem) and "candidate_char_offsets" in x.derived
        else distractor_offset(x, notes) if isinstance(x, AgreementItem)
        else x
        for x in items
    ]  # fmt: skip
    return switches(items, notes)
