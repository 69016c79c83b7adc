"""Behavioural summaries: accuracy with its interval, pair accuracy, and the baselines beside them.

Accuracy's 95% interval is a bootstrap over schemas (a schema's twins resampled together: their scores are not
independent); pair accuracy's is a Wilson interval over the pairs, each pair one trial, with its chance level
``pair_chance``: 0.25 for two independent random choices.

Twins have opposite answers, so any rule that ignores the switch word (always the first candidate, always
the candidate nearest the pronoun) is right on exactly one twin of each pair: 50% accuracy and 0% pair
accuracy by construction. Pair accuracy (both twins right) is the number that shows the model used the switch.

Each row also carries ``stderr``, the standard error lm-eval-harness reports (the sample standard deviation of
the 0/1 scores over the square root of n), so a row can be read beside published "acc ± stderr" numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from interp.analysis import bootstrap_mean_interval, wilson_interval

METHODS = ("full", "partial", "question", "lm_eval")
LABELS = {
    "full": "full scoring",
    "partial": "partial scoring",
    "question": "question scoring",
    "lm_eval": "partial scoring, lm-eval-harness rules",
}
"""How each scoring method is named in the tables."""
PRIMARY = "partial"
"""The pre-declared primary metric of resolution: partial scoring (Trinh and Le 2018), the score the study's
README reports first and the report's headline; full and question scoring are secondary."""


def stderr(k: int, n: int) -> float:
    """lm-eval-harness's standard error of a mean of ``n`` 0/1 scores with ``k`` ones.

    >>> round(stderr(160, 273), 4)  # 160 of wsc273's 273 right: "0.586 ± 0.030"
    0.0299
    """
    if n < 2:
        return float("nan")
    p = k / n
    return math.sqrt(p * (1 - p) * n / (n - 1)) / math.sqrt(n)


def accuracy_row(
    name: str, correct: Sequence[bool], pairs: Sequence[tuple[bool, bool]] | None, schemas: Sequence[str]
) -> dict:
    """``method, n, correct, accuracy, ci_low, ci_high, stderr`` and, with pairs, ``pairs, pair_accuracy,
    pair_ci_low, pair_ci_high, pair_chance``; ``schemas`` (one per item) group the bootstrap."""
    n, k = len(correct), int(sum(correct))
    low, high = _interval(correct, schemas)
    row = {"method": name, "n": n, "correct": k, "accuracy": k / n if n else float("nan"),
           "ci_low": low, "ci_high": high, "stderr": stderr(k, n)}  # fmt: skip
    if pairs:
        both = sum(a and b for a, b in pairs)
        plow, phigh = wilson_interval(both, len(pairs))
        row.update(pairs=len(pairs), pair_accuracy=both / len(pairs), pair_ci_low=plow, pair_ci_high=phigh,
                   pair_chance=0.25)  # fmt: skip
    return row


def _interval(correct: Sequence[bool], schemas: Sequence[str]) -> tuple[float, float]:
    """95% bootstrap over schemas (2,000 resamples, seed 0); NaN with fewer than two schemas."""
    if len(set(schemas)) < 2:
        return float("nan"), float("nan")
    return bootstrap_mean_interval([float(c) for c in correct], 2000, 0, groups=list(schemas))[1:]


def schema_ids(records: Sequence[dict]) -> list[str]:
    """Each record's schema id (an item without a twin is its own schema)."""
    return [r["schema_id"] or r["id"] for r in records]  # an item without a twin is its own schema


def _pairs(
    records: Sequence[dict], pairs: Sequence[tuple[int, int]], ok, keep=None
) -> list[tuple[bool, bool]]:
    """Per twin pair (indices into ``records``) whose both items pass ``keep``: whether each twin is right."""
    return [(bool(ok(records[a])), bool(ok(records[b]))) for a, b in pairs
            if keep is None or (keep(records[a]) and keep(records[b]))]  # fmt: skip


def resolution_table(records: Sequence[dict], pairs: Sequence[tuple[int, int]]) -> pd.DataFrame:
    """Accuracy of each scoring method and of the baselines on resolution records.

    The baselines pick the candidate mentioned first or nearest before the pronoun; items whose candidate
    positions are unknown are left out of them (their ``n`` says so).
    """
    rows = []
    for method in METHODS:
        ok = lambda r, m=method: r["correct"][m]  # noqa: E731
        rows.append(
            accuracy_row(
                LABELS[method], [ok(r) for r in records], _pairs(records, pairs, ok), schema_ids(records)
            )
        )
    known = lambda r: r.get("nearest_candidate") is not None  # noqa: E731
    placed = [r for r in records if known(r)]
    baselines = {
        "baseline: first candidate": lambda r: r["answer"] == 1 - r["nearest_candidate"],
        "baseline: nearest candidate": lambda r: r["answer"] == r["nearest_candidate"],
    }
    if placed:
        for name, ok in baselines.items():
            rows.append(
                accuracy_row(
                    name, [ok(r) for r in placed], _pairs(records, pairs, ok, known), schema_ids(placed)
                )
            )
    frame = pd.DataFrame(rows)
    frame["chance"] = 0.5
    return frame


def agreement_table(records: Sequence[dict], pairs: Sequence[tuple[int, int]]) -> pd.DataFrame:
    """Accuracy of the pronoun prediction, overall and on two-person prompts, with the baselines."""
    rows = []
    two = [r for r in records if r["two_people"]]
    is_two = lambda r: r["two_people"]  # noqa: E731
    ok = lambda r: r["correct"]  # noqa: E731
    rows.append(
        accuracy_row(
            "model, all prompts", [ok(r) for r in records], _pairs(records, pairs, ok), schema_ids(records)
        )
    )
    if two:
        rows.append(
            accuracy_row(
                "model, two-person prompts",
                [ok(r) for r in two],
                _pairs(records, pairs, ok, is_two),
                schema_ids(two),
            )
        )
        recent = lambda r: r["antecedent_is_recent"]  # noqa: E731
        rows.append(
            accuracy_row(
                "baseline: most recent name, two-person",
                [recent(r) for r in two],
                _pairs(records, pairs, recent, is_two),
                schema_ids(two),
            )
        )
        first = lambda r: not r["antecedent_is_recent"]  # noqa: E731
        rows.append(
            accuracy_row(
                "baseline: first name, two-person",
                [first(r) for r in two],
                _pairs(records, pairs, first, is_two),
                schema_ids(two),
            )
        )
    frame = pd.DataFrame(rows)
    frame["chance"] = [1 / len(records[0]["targets"])] * len(frame)
    return frame


def verdict(row: dict | pd.Series, model: str, task: str) -> str:
    """A plain sentence: above chance, at chance or below, judged by whether the 95% interval holds the row's
    chance level."""
    acc, low, high, chance = row["accuracy"], row["ci_low"], row["ci_high"], float(row["chance"])
    where = "above chance" if low > chance else "below chance" if high < chance else "at chance"
    return f"{model} is {where} on {task}: {acc:.2f} [{low:.2f}, {high:.2f}] (chance {chance:g}, n = {int(row['n'])})."
