"""How many items each analysis used, and why it left the others out: one table per data set.

Behaviour scoring (a model with a language-model head) takes every item. The twin analyses take the pairs
:class:`~studies.data.twins.Pairing` allows; attention to the candidates needs both candidates found
before the pronoun; attention from the switch needs a switch word; the held-out head test and the probes need
at least two schemas. The reasons come from the notes gathered while the data were read
(:mod:`studies.data.notes`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import pandas as pd

SHORT = {
    "no_twin": "no twin",
    "one_way": "twin link not returned",
    "same_answer": "twin has the same answer",
    "other_candidates": "twin has other candidates or pronoun",
    "regions": "differs from its twin in several places",
    "insertion": "lacks the words its twin adds",
    "switch_overlap": "differs from its twin inside the pronoun or a candidate",
    "same_text": "twin has the same text",
    "candidate_missing": "a candidate not found before the pronoun",
}
PAIR_KINDS = ("no_twin", "one_way", "same_answer")
SWITCH_KINDS = ("no_twin", "regions", "insertion", "switch_overlap", "same_text")


def _why(left: Iterable[str], notes, kinds: Sequence[str], fallback: str) -> str:
    """``reason: count; ...`` for the items left out, each counted under the first kind that names it."""
    counts: Counter[str] = Counter()
    for item_id in left:
        kind = next((k for k in kinds if item_id in notes.ids.get(k, ())), None)
        counts[SHORT[kind] if kind else fallback] += 1
    return "; ".join(f"{reason}: {n}" for reason, n in counts.items())


def _row(name: str, used: set[str], ids: list[str], notes, kinds: Sequence[str], fallback: str) -> dict:
    left = [i for i in ids if i not in used]
    return {
        "analysis": name,
        "items": len(used),
        "left_out": len(left),
        "why": _why(left, notes, kinds, fallback),
    }


def _skipped(name: str, ids: list[str], reason: str | None) -> dict:
    if reason is None:
        return {"analysis": name, "items": len(ids), "left_out": 0, "why": ""}
    return {"analysis": name, "items": 0, "left_out": len(ids), "why": reason}


def coverage_table(planned, records: Sequence[dict], analysis: dict, lm: bool) -> pd.DataFrame:
    """``analysis, items, left_out, why``: one row per analysis of one data set."""
    items, pairing, notes = planned.data.items, planned.pairing, planned.data.notes
    ids = [x.id for x in items]
    paired = {items[k].id for pair in pairing.pairs for k in pair}
    comparable = {items[k].id for pair in pairing.comparable for k in pair}
    rows = []
    if lm:
        rows.append({"analysis": "behaviour scoring", "items": len(ids), "left_out": 0, "why": ""})
        rows.append(_row("pair accuracy", paired, ids, notes, PAIR_KINDS, "no usable twin"))
    if items[0].kind == "resolution":
        placed = {x.id for x in items if x.candidate_char_offsets and None not in x.candidate_char_offsets}
        rows.append(_row("attention to the candidates", placed, ids, notes, ("candidate_missing",), "other"))
        switched = {x.id for x in items if x.switch_char_offset is not None}
        rows.append(_row("attention from the switch word", switched, ids, notes, SWITCH_KINDS, "no switch"))
        kinds = (*PAIR_KINDS, "other_candidates")
        rows.append(
            _row("twin differences at each position", comparable, ids, notes, kinds, "no usable twin")
        )
    else:
        two = {x.id for x in items if x.distractor is not None}
        rows.append(
            _row("attention to the antecedent, not the distractor", two, ids, notes, (), "one person only")
        )
    rows.append(_patching_row(planned, analysis, ids))
    rows.append(_skipped("held-out head test", ids, analysis.get("heads_skipped")))
    rows.append(_skipped("probes", ids, analysis.get("probes_skipped")))
    return pd.DataFrame(rows)


def _patching_row(planned, analysis: dict, ids: list[str]) -> dict:
    items, pairing, notes = planned.data.items, planned.pairing, planned.data.notes
    used = 2 * analysis["pairs_used"]
    comparable = {items[k].id for pair in pairing.comparable for k in pair}
    left = [i for i in ids if i not in comparable]
    reasons = _why(left, notes, (*PAIR_KINDS, "other_candidates"), "no usable twin")
    unequal = 2 * (len(pairing.comparable) - analysis["pairs_kept"])
    beyond = 2 * analysis["pairs_kept"] - used
    extra = [f"twins tokenize to different lengths: {unequal}"] if unequal else []
    extra += [f"beyond --patch-pairs: {beyond}"] if beyond else []
    why = "; ".join(x for x in [reasons, *extra] if x)
    return {"analysis": "twin patching", "items": used, "left_out": len(ids) - used, "why": why}
