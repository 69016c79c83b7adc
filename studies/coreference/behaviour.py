"""Behavioural summaries: accuracy with Wilson intervals, pair accuracy, and the baselines beside them.

Twins have opposite answers, so any rule that ignores the switch word (always the first candidate, always
the candidate nearest the pronoun) is right on exactly one twin of each pair: 50% accuracy and 0% pair
accuracy by construction. Pair accuracy (both twins right) is the number that shows the model used the switch.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from interp.analysis import wilson_interval

METHODS = ("full", "partial", "question")


def accuracy_row(name: str, correct: Sequence[bool], pairs: Sequence[tuple[bool, bool]] | None) -> dict:
    """``method, n, accuracy, ci_low, ci_high, pairs, pair_accuracy, pair_ci_low, pair_ci_high``."""
    n, k = len(correct), int(sum(correct))
    low, high = wilson_interval(k, n)
    row = {"method": name, "n": n, "correct": k, "accuracy": k / n, "ci_low": low, "ci_high": high}
    if pairs:
        both = sum(a and b for a, b in pairs)
        plow, phigh = wilson_interval(both, len(pairs))
        row.update(pairs=len(pairs), pair_accuracy=both / len(pairs), pair_ci_low=plow, pair_ci_high=phigh)
    return row


def _pairs(records: Sequence[dict], ok) -> list[tuple[bool, bool]]:
    by_schema: dict[str, list[bool]] = {}
    for r in records:
        by_schema.setdefault(r["schema_id"], []).append(bool(ok(r)))
    return [tuple(v) for v in by_schema.values() if len(v) == 2]  # type: ignore[misc]


def resolution_table(records: Sequence[dict]) -> pd.DataFrame:
    """Accuracy of each scoring method and of the baselines on resolution records."""
    rows = []
    for method in METHODS:
        ok = lambda r, m=method: r["correct"][m]  # noqa: E731
        rows.append(accuracy_row(f"{method} scoring", [ok(r) for r in records], _pairs(records, ok)))
    baselines = {
        "baseline: first candidate": lambda r: r["answer"] == 0,
        "baseline: nearest candidate": lambda r: r["answer"] == 1,
    }
    for name, ok in baselines.items():
        rows.append(accuracy_row(name, [ok(r) for r in records], _pairs(records, ok)))
    frame = pd.DataFrame(rows)
    frame["chance"] = 0.5
    return frame


def agreement_table(records: Sequence[dict]) -> pd.DataFrame:
    """Accuracy of the pronoun prediction, overall and on two-person prompts, with the baselines."""
    rows = []
    two = [r for r in records if r["two_people"]]
    for label, subset in (("all prompts", records), ("two-person prompts", two)):
        if not subset:
            continue
        ok = lambda r: r["correct"]  # noqa: E731
        rows.append(accuracy_row(f"model, {label}", [ok(r) for r in subset], _pairs(subset, ok)))
    if two:
        recent = lambda r: r["antecedent_is_recent"]  # noqa: E731
        rows.append(
            accuracy_row(
                "baseline: most recent name, two-person", [recent(r) for r in two], _pairs(two, recent)
            )
        )
        first = lambda r: not r["antecedent_is_recent"]  # noqa: E731
        rows.append(
            accuracy_row("baseline: first name, two-person", [first(r) for r in two], _pairs(two, first))
        )
    frame = pd.DataFrame(rows)
    frame["chance"] = [1 / len(records[0]["targets"])] * len(frame)
    return frame


def verdict(row: dict | pd.Series, model: str, task: str) -> str:
    """A plain sentence: above chance, at chance or below, judged by whether the 95% interval holds 0.5."""
    acc, low, high = row["accuracy"], row["ci_low"], row["ci_high"]
    where = "above chance" if low > 0.5 else "below chance" if high < 0.5 else "at chance"
    return f"{model} is {where} on {task}: {acc:.2f} [{low:.2f}, {high:.2f}] (n = {int(row['n'])})."
