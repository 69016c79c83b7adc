"""The rules a data set must follow: what a file gives is checked strictly, what was derived is judged.

Per item: offsets point at the text they name, given candidates come before the pronoun, answers are in
range. Across items: one kind only, unique ids, every twin id names an item of the file, and linked items
do not give different schema ids. A twin link whose region the file gives (a resolution item's
``switch_word`` and ``switch_char_offset``; an agreement item's antecedent, always) is a claim checked as
strictly as ever: the twin points back, has the same candidates (targets), the other answer, and text that
differs only in that region. Links without a given region are judged instead (:mod:`studies.data.twins`).
"""

from __future__ import annotations

from collections.abc import Sequence

from studies.data.items import AgreementItem, Item, ResolutionItem, where

MAX_REPORTED = 20


def _at(text: str, offset: int, piece: str) -> bool:
    return 0 <= offset and text[offset : offset + len(piece)] == piece


def _whole_word(text: str, offset: int, piece: str) -> bool:
    end = offset + len(piece)
    return (offset == 0 or not text[offset - 1].isalnum()) and (end == len(text) or not text[end].isalnum())


def span_problems(text: str, offset: int, piece: str, name: str) -> list[str]:
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


def _switch_problems(item: ResolutionItem) -> list[str]:
    word_given = item.switch_word is not None and "switch_word" not in item.derived
    offset_given = item.switch_char_offset is not None and "switch_char_offset" not in item.derived
    if word_given != offset_given:
        return ["give switch_word and switch_char_offset together, or neither (the switch is then found by "
                "comparing the twins)"]  # fmt: skip
    if not item.declares_switch:
        return []
    assert item.switch_word is not None and item.switch_char_offset is not None
    problems = span_problems(item.sentence, item.switch_char_offset, item.switch_word, "switch_word")
    if item.twin_id is None:
        problems.append("switch_word is given but the item has no twin_id; a switch is where twins differ")
    spans = [(item.pronoun_char_offset, item.pronoun)]
    spans += [(o, c) for o, c in zip(item.candidate_char_offsets or (), item.candidates, strict=False)
              if o is not None]  # fmt: skip
    s0, s1 = item.switch_char_offset, item.switch_char_offset + len(item.switch_word)
    if any(s0 < offset + len(piece) and offset < s1 for offset, piece in spans):
        problems.append("switch_word overlaps the pronoun or a candidate")
    return problems


def resolution_problems(item: ResolutionItem) -> list[str]:
    s = item.sentence
    problems = span_problems(s, item.pronoun_char_offset, item.pronoun, "pronoun")
    if item.blank and s.count("_") != 1:
        problems.append(f"a blank item holds one '_'; this sentence holds {s.count('_')}")
    offsets = item.candidate_char_offsets
    if len(item.candidates) != 2 or (offsets is not None and len(offsets) != 2):
        return problems + ["candidates and candidate_char_offsets must hold exactly two entries each"]
    if not all(c.strip() for c in item.candidates):
        problems.append(f"a candidate is empty: {list(item.candidates)!r}")
    elif item.candidates[0].lower() == item.candidates[1].lower():
        problems.append(f"the two candidates are the same, {item.candidates[0]!r}")
    if offsets is not None and "candidate_char_offsets" not in item.derived:
        for candidate, offset in zip(item.candidates, offsets, strict=True):
            found = span_problems(s, offset, candidate, "candidate") if offset is not None else []
            problems += found
            if not found and offset is not None and offset + len(candidate) > item.pronoun_char_offset:
                problems.append(f"candidate {candidate!r} does not come before the pronoun (offset {offset})")
    problems += _switch_problems(item)
    if item.answer not in (0, 1):
        problems.append(f"answer {item.answer} is out of range; it indexes the two candidates, so 0 or 1")
    return problems


def agreement_problems(item: AgreementItem) -> list[str]:
    p = item.prompt
    problems = span_problems(p, item.antecedent_char_offset, item.antecedent, "antecedent")
    if not p or p != p.rstrip():
        problems.append("prompt must end right before the pronoun, without trailing whitespace")
    if len(item.targets) < 2 or len(set(item.targets)) != len(item.targets):
        problems.append(f"targets must be two or more distinct pronouns, got {list(item.targets)!r}")
    for target in item.targets:
        if not target.startswith(" ") or not target.strip() or target != " " + target.strip():
            problems.append(f"target {target!r} must be one word with a single leading space, e.g. ' she'")
    if not 0 <= item.answer < len(item.targets):
        problems.append(f"answer {item.answer} is out of range for {len(item.targets)} targets")
    if item.distractor is not None and item.distractor_char_offset is None:
        if "distractor_char_offset" in item.derived:
            problems.append(
                f"distractor {item.distractor!r} does not occur in the prompt outside the antecedent"
            )
        else:
            problems.append("distractor and distractor_char_offset must both be null or both be set")
    elif item.distractor is None and item.distractor_char_offset is not None:
        problems.append("distractor and distractor_char_offset must both be null or both be set")
    elif item.distractor is not None and item.distractor_char_offset is not None:
        found = span_problems(p, item.distractor_char_offset, item.distractor, "distractor")
        problems += found
        a0, a1 = item.antecedent_char_offset, item.antecedent_char_offset + len(item.antecedent)
        d0, d1 = item.distractor_char_offset, item.distractor_char_offset + len(item.distractor)
        if not found and d0 < a1 and a0 < d1:
            problems.append("distractor overlaps the antecedent")
    return problems


def _differ_only_in(a: str, b: str, offset: int, piece_a: str, piece_b: str) -> bool:
    """Whether ``a`` (with ``piece_a`` at ``offset``) and ``b`` (with ``piece_b`` there) agree elsewhere."""
    return a[:offset] == b[:offset] and a[offset + len(piece_a) :] == b[offset + len(piece_b) :]


def claimed_twin_problems(a: Item, b: Item) -> list[str]:
    """Problems with a twin link whose region the file gives; ``a`` names ``b``."""
    problems = []
    if b.twin_id != a.id:
        problems.append(f"its twin {b.id!r} points to {b.twin_id!r}, not back to it")
    if a.answer == b.answer:
        problems.append(f"its twin {b.id!r} has the same answer ({a.answer}); twins must disagree")
    if isinstance(a, ResolutionItem) and isinstance(b, ResolutionItem):
        if a.candidates != b.candidates or a.pronoun != b.pronoun:
            problems.append(f"its twin {b.id!r} has other candidates or another pronoun")
        if not b.declares_switch:
            problems.append(
                f"its twin {b.id!r} gives no switch; give switch_word and switch_char_offset on both"
            )
        elif a.switch_word == b.switch_word or a.switch_char_offset != b.switch_char_offset:
            problems.append(f"its twin {b.id!r} must have a different switch_word at the same offset")
        elif not _differ_only_in(a.sentence, b.sentence, a.switch_char_offset, a.switch_word, b.switch_word):  # type: ignore[arg-type]
            problems.append(f"its twin {b.id!r} differs from it outside the switch region")
    elif isinstance(a, AgreementItem) and isinstance(b, AgreementItem):
        if a.targets != b.targets or a.distractor != b.distractor:
            problems.append(f"its twin {b.id!r} has other targets or another distractor")
        if a.antecedent == b.antecedent or a.antecedent_char_offset != b.antecedent_char_offset:
            problems.append(f"its twin {b.id!r} must have a different antecedent at the same offset")
        elif not _differ_only_in(a.prompt, b.prompt, a.antecedent_char_offset, a.antecedent, b.antecedent):
            problems.append(f"its twin {b.id!r} differs from it outside the antecedent region")
    return problems


def _claims(item: Item) -> bool:
    return isinstance(item, AgreementItem) or item.declares_switch


def _given_schema(item: Item) -> str | None:
    return None if "schema_id" in item.derived else item.schema_id


def problems_of(items: Sequence[Item]) -> list[str]:
    """Every broken rule, each as ``file:line: item 'id': rule``."""
    if not items:
        return ["no items to validate"]
    kinds = {type(item) for item in items}
    if len(kinds) > 1:
        first = items[0]
        odd = next(item for item in items if type(item) is not type(first))
        return [f"{where(odd)}: is a {odd.kind} item, but {where(first)} is a {first.kind} item; "
                "a file holds one kind only"]  # fmt: skip
    problems: list[str] = []
    by_id: dict[str, Item] = {}
    position = {}
    for item in items:
        position.setdefault(item.id, len(position))
        at = where(item)
        if item.id in by_id:
            problems.append(f"{at}: duplicate id, first used at line {by_id[item.id].line}")
            continue
        by_id[item.id] = item
        if not item.id or (item.schema_id is not None and not item.schema_id):
            problems.append(f"{at}: id and schema_id must not be empty")
        if item.twin_id == item.id:
            problems.append(f"{at}: twin_id points to the item itself")
        check = resolution_problems if isinstance(item, ResolutionItem) else agreement_problems
        problems += [f"{at}: {problem}" for problem in check(item)]  # type: ignore[arg-type]
    for item in by_id.values():
        if item.twin_id is None or item.twin_id == item.id:
            continue
        at = where(item)
        twin = by_id.get(item.twin_id)
        if twin is None:
            problems.append(f"{at}: twin {item.twin_id!r} is missing")
            continue
        a_schema, b_schema = _given_schema(item), _given_schema(twin)
        if a_schema is not None and b_schema is not None and a_schema != b_schema:
            problems.append(f"{at}: its twin {twin.id!r} has schema_id {b_schema!r}, not {a_schema!r}")
        if _claims(item):
            # a reciprocal claimed pair is reported once, at the item that comes first
            if twin.twin_id == item.id and _claims(twin) and position[twin.id] < position[item.id]:
                continue
            problems += [f"{at}: {problem}" for problem in claimed_twin_problems(item, twin)]
    return problems


def validate(items: Sequence[Item]) -> None:
    """Check every rule; one ``ValueError`` lists each broken rule with file:line and id."""
    problems = problems_of(items)
    if len(problems) == 1:
        raise ValueError(problems[0])
    if problems:
        more = len(problems) - MAX_REPORTED
        tail = f"\n... and {more} more" if more > 0 else ""
        raise ValueError(
            f"{len(problems)} problem(s) in the data:\n" + "\n".join(problems[:MAX_REPORTED]) + tail
        )
