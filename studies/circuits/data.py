"""The study's pairs: agreement twins as (clean, corrupted) inputs, split by schema into scoring and held-out.

Each twin pair gives two pairs, one per direction: clean is one twin, corrupted the other, the answer the clean
twin's agreeing pronoun and the foil its other target, read at the last position (the next token is the
pronoun). Twins that tokenize to different lengths have no position-by-position correspondence and are left
out, with their number reported. Scoring and held-out pairs come from disjoint schemas, so no prompt frame is
shared between the pairs a circuit is chosen on and those it is tested on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from interp.circuits import Pairs
from studies.data.forward import prepend_bos
from studies.data.load import AgreementItem, split_by_schema, twin_pairs
from studies.data.spans import target_ids


@dataclass(frozen=True)
class StudyPairs:
    """Pairs ready to score or test, and what each row is."""

    pairs: Pairs
    ids: list[tuple[str, str]]
    two_people: list[bool]
    names: list[list[int]]  # token positions of the antecedent (where the twins differ)
    first: list[bool]  # whether the clean twin's answer is its first target (" she" of " she", " he")

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, rows: list[int]) -> StudyPairs:
        pick = lambda values: [values[i] for i in rows]  # noqa: E731
        return StudyPairs(
            self.pairs[rows], pick(self.ids), pick(self.two_people), pick(self.names), pick(self.first)
        )


def check_items(items: list) -> None:
    """The study needs agreement twins (a prompt that stops before a pronoun); anything else is refused."""
    wrong = [x for x in items if not isinstance(x, AgreementItem)]
    if wrong:
        raise ValueError(
            f"the circuits study needs agreement items (a prompt that stops before a pronoun, with targets); "
            f"{wrong[0].id!r} is a {wrong[0].kind} item. Use --data agreement or a file in that format "
            "(studies/data/README.md)"
        )


def build_pairs(model, twins: list[tuple[AgreementItem, AgreementItem]]) -> tuple[StudyPairs, int]:
    """Both directions of every twin pair whose twins tokenize to one length, sorted by length (right-padded
    batches stay tight); and how many twin pairs were left out for differing in length."""
    rows, dropped = [], 0
    for a, b in twins:
        tokens = model.to_tokens([a.prompt, b.prompt], prepend_bos=prepend_bos(model), padding_side="right")
        if not bool(tokens.mask.all()):
            dropped += 1
            continue
        ids = tokens.ids.cpu()
        for clean, corrupt, item, twin in ((0, 1, a, b), (1, 0, b, a)):
            targets = target_ids(model, item)
            start = item.antecedent_char_offset
            name = tokens.span_positions(start, start + len(item.antecedent), row=clean)
            rows.append(
                (ids[clean], ids[corrupt], targets[item.answer], targets[twin.answer], (item.id, twin.id),
                 item.distractor is not None, [int(p) for p in name], item.answer == 0)
            )  # fmt: skip
    if not rows:
        raise ValueError("no twin pair tokenizes to one length for both twins; nothing to patch")
    rows.sort(key=lambda r: (len(r[0]), r[4]))
    width = max(len(r[0]) for r in rows)
    n = len(rows)
    clean = torch.zeros(n, width, dtype=torch.long)
    corrupt = torch.zeros(n, width, dtype=torch.long)
    mask = torch.zeros(n, width, dtype=torch.long)
    for i, r in enumerate(rows):
        length = len(r[0])
        clean[i, :length], corrupt[i, :length], mask[i, :length] = r[0], r[1], 1
    pairs = Pairs(
        clean=clean,
        corrupt=corrupt,
        attention_mask=mask,
        positions=mask.sum(1) - 1,
        labels={"answer": torch.tensor([r[2] for r in rows]), "foil": torch.tensor([r[3] for r in rows])},
    )
    found = StudyPairs(
        pairs, [r[4] for r in rows], [r[5] for r in rows], [r[6] for r in rows], [r[7] for r in rows]
    )
    return found, dropped


def split_pairs(model, items: list, fraction: float, seed: int) -> tuple[StudyPairs, StudyPairs, int]:
    """Scoring and held-out pairs from disjoint schemas (``fraction`` of the schemas score), and the number
    of twin pairs dropped for differing in length."""
    check_items(items)
    first, second = split_by_schema(items, fraction, seed)
    scoring, dropped_a = build_pairs(model, twin_pairs(first))
    held_out, dropped_b = build_pairs(model, twin_pairs(second))
    return scoring, held_out, dropped_a + dropped_b


def sample(pairs: StudyPairs, n: int | None, seed: int) -> StudyPairs:
    """``n`` pairs (all when ``None`` or more than there are), drawn as whole twin pairs (both directions)
    with ``random.Random(seed)``, kept in length order."""
    groups: dict[frozenset, list[int]] = {}
    for row, ids in enumerate(pairs.ids):
        groups.setdefault(frozenset(ids), []).append(row)
    if n is None or n >= len(pairs):
        return pairs
    keys = sorted(groups, key=lambda k: sorted(k))
    random.Random(seed).shuffle(keys)
    rows: list[int] = []
    for key in keys:
        if len(rows) >= n:
            break
        rows += groups[key]
    return pairs.subset(sorted(rows))
