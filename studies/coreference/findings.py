"""What the coreference report leads with: one line per question the study asks, linked to its evidence.

For each data set: does the model resolve the pronoun (the primary metric, partial scoring, against chance),
which heads carry the referent on held-out schemas, what patching them recovers, and where a probe reads the
referent; then what was not found. Each line comes from the same tables the sections show, so the summary
cannot say more than the sections do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interp.report import Report
from studies.coreference.behaviour import LABELS, PRIMARY


def add_findings(report: Report, model: str, results: Sequence[Any], causal: bool) -> None:
    """Add the report's "What we found" lines (see the module docstring)."""
    for result in results:
        a, label = result.analysis, result.name
        if "behaviour" in a:
            report.add_finding(_behaviour(a["behaviour"], model, label, result.kind), f"Behaviour: {label}")
        heads = a.get("heads")
        if heads is not None and len(heads):
            report.add_finding(_heads(heads, label), f"Attention: {label}")
        exact = a.get("z_exact")
        if exact is not None and len(exact):
            top = exact.iloc[0]
            report.add_finding(
                f"{label}: patching head L{int(top['layer'])}H{int(top['head'])} from one twin into the other "
                f"recovers {top['patched']:.2f} of the twin difference (the largest of the heads patched, on the pairs "
                "they were chosen on: a maximum, not a held-out estimate).",
                f"Causal: {label}",
            )
        probes = a.get("probes")
        if probes is not None and len(probes):
            best = probes.loc[probes["accuracy"].idxmax()]
            report.add_finding(
                f"{label}: a linear probe reads the referent best at the {best['role']} after layer "
                f"{int(best['layer'])}, {best['accuracy']:.2f} [{best['ci_low']:.2f}, {best['ci_high']:.2f}] "
                f"(majority class {best['chance']:.2f}, shuffled-label control {best['control_accuracy']:.2f}; "
                f"the best of {len(probes)} probes on the held-out schemas, so a maximum, not a held-out estimate).",
                f"Probes: {label}",
            )
    if causal:
        report.add_finding(
            "Not found, by construction: at the pronoun itself, when the switch word comes after it, a causal "
            "model's activations are identical across twins, so nothing there can carry the referent.",
            "The seed's picture",
        )


def _behaviour(table: Any, model: str, label: str, kind: str) -> str:
    row = table[table["method"] == LABELS[PRIMARY]].iloc[0] if kind == "resolution" else table.iloc[0]
    acc, low, high = float(row["accuracy"]), float(row["ci_low"]), float(row["ci_high"])
    where = "resolves the pronoun above chance" if low > 0.5 else "does not resolve it above chance"
    if high < 0.5:
        where = "scores below chance"
    return (
        f"{label}: {model} {where}: {row['method']} accuracy **{acc:.2f}** [{low:.2f}, {high:.2f}] on "
        f"{int(row['n'])} items (chance 0.5)."
    )


def _heads(heads: Any, label: str) -> str:
    """The attention line. "Above chance" only for heads whose held-out interval excludes 0.5 (the table's
    ``above_chance``); the head named is the one with the highest held-out accuracy among them, or, when none
    is, the head ranked first on the selection schemas, reported at whatever it scored."""
    above = heads[heads["above_chance"]] if "above_chance" in heads else heads.iloc[:0]
    interval = "interval over held-out schemas, twins together"
    if not len(above):
        top = heads.iloc[0]
        return (
            f"{label}: no head attends to the referent above chance (0.5) on held-out schemas. The head ranked "
            f"first by accuracy on the selection schemas, {_name(top)} from {top['query']}, scores "
            f"{top['test_accuracy']:.2f} [{top['test_ci_low']:.2f}, {top['test_ci_high']:.2f}] held out "
            f"({interval}; Holm p = {top['p_holm']:.2g}): {_against_chance(top)}."
        )
    best = above.loc[above["test_accuracy"].idxmax()]
    distinct = lambda t: len(set(zip(t["layer"], t["head"], strict=True)))  # noqa: E731  a head tested by weight and by norm
    return (
        f"{label}: {distinct(above)} of the {distinct(heads)} selected heads ({len(above)} of {len(heads)} tests, "
        f"by query position and measure) attend to the referent above chance (0.5) on held-out schemas (Holm "
        f"p < 0.05 and the {interval} above 0.5); the highest held-out accuracy among them: {_name(best)} from "
        f"{best['query']}, {best['test_accuracy']:.2f} [{best['test_ci_low']:.2f}, {best['test_ci_high']:.2f}]."
    )


def _name(row: Any) -> str:
    return f"L{int(row['layer'])}H{int(row['head'])}"


def _against_chance(row: Any) -> str:
    if row["test_ci_high"] < 0.5:
        return "below chance"
    if row["test_ci_low"] > 0.5:
        return "its interval is above chance, but the corrected test does not pass"
    return "at chance"
