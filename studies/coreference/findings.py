"""What the coreference report leads with: one line per question the study asks, linked to its evidence.

For each data set: is the model's preference moved by the switch word (switch sensitivity, with its bias
apart: the primary measure), does it resolve the pronoun (partial scoring's accuracy, against chance),
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
        if a.get("switch"):
            report.add_finding(_switch(a["switch"], model, label, result.kind), f"Behaviour: {label}")
        if "behaviour" in a:
            report.add_finding(_behaviour(a["behaviour"], model, label, result.kind), f"Behaviour: {label}")
        heads = a.get("heads")
        if heads is not None and len(heads):
            line = _heads(heads, label, blind_queries(a.get("twins")))
            extra = sensitivity_line(heads)
            report.add_finding(line + (" " + extra if extra else ""), f"Attention: {label}")
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


def _switch(summaries: dict, model: str, label: str, kind: str) -> str:
    """The primary line: the switch sensitivity and bias of the primary scoring (resolution) or of all prompts
    (agreement), in the words of :meth:`~studies.data.switch.SwitchSummary.verdict`."""
    name = LABELS[PRIMARY] if kind == "resolution" else next(iter(summaries))
    summary = summaries.get(name) or next(iter(summaries.values()))
    return f"{label} ({name}): {summary.verdict(model)}"


def _behaviour(table: Any, model: str, label: str, kind: str) -> str:
    row = table[table["method"] == LABELS[PRIMARY]].iloc[0] if kind == "resolution" else table.iloc[0]
    acc, low, high = float(row["accuracy"]), float(row["ci_low"]), float(row["ci_high"])
    chance = float(row["chance"])
    where = "resolves the pronoun above chance" if low > chance else "does not resolve it above chance"
    if high < chance:
        where = "scores below chance"
    return (
        f"{label}: {model} {where}: {row['method']} accuracy **{acc:.2f}** [{low:.2f}, {high:.2f}] on "
        f"{int(row['n'])} items (chance {chance:g})."
    )


def _heads(heads: Any, label: str, blind: Sequence[str] = ()) -> str:
    """The attention line. "Above chance" only for heads whose held-out interval excludes 0.5 (the table's
    ``above_chance``); the head named is :func:`lead_head`'s, and the counts are :func:`head_counts`'s, the words
    the attention section uses too."""
    top, passed = lead_head(heads, blind)
    counts = head_counts(heads)
    if top is None:
        return f"{label}: {counts}; {_blind_words(blind, heads)}"
    if passed:
        return (
            f"{label}: {counts}; the highest held-out accuracy among them: {head_name(top)} from {top['query']} "
            f"({top['by']}), {top['test_accuracy']:.2f} [{top['test_ci_low']:.2f}, {top['test_ci_high']:.2f}]."
        )
    return (
        f"{label}: {counts}. The head ranked first by accuracy on the selection schemas"
        f"{' at a position that can see the switch word' if blind else ''}, {head_name(top)} from {top['query']} "
        f"({top['by']}), scores {top['test_accuracy']:.2f} [{top['test_ci_low']:.2f}, {top['test_ci_high']:.2f}] "
        f"held out ({INTERVAL}; Holm p = {top['p_holm']:.2g}): {_against_chance(top)}."
    )


INTERVAL = "interval over held-out schemas, twins together"


def sensitivity_line(heads: Any) -> str:
    """The selected heads' switch sensitivity in words, as the summary and the section say it: how many tests
    are sensitive after Holm, and the most sensitive head (empty without the columns: no twin pairs)."""
    if "sens_p_holm" not in heads:
        return ""
    tested = heads[heads["sens_p_holm"].notna()]
    if not len(tested):
        return ""
    sensitive = tested[tested["sensitive"].astype(bool)]
    top = tested.loc[tested["sens"].idxmax()]
    return (
        f"Switch sensitivity of the same heads' attention on the held-out twin pairs (mass on each twin's "
        f"referent minus mass on the other candidate, summed over a pair; 0 is none): {len(sensitive)} of "
        f"{len(tested)} tests sensitive (Holm p < 0.05 over them and the interval above 0); the largest, "
        f"{head_name(top)} from {top['query']} ({top['by']}), {top['sens']:+.3f} [{top['sens_low']:+.3f}, "
        f"{top['sens_high']:+.3f}] over {int(top['sens_pairs'])} pairs (Holm p = {top['sens_p_holm']:.2g})."
    )


def head_counts(heads: Any) -> str:
    """How many heads and tests pass, in the words the summary and the section share: "1 of the 31 selected
    heads (1 of 40 tests, by query position and measure) attend to the referent above chance (0.5) on held-out
    schemas (...)", or "no head attends ..." with the number selected and tested."""
    above = heads[heads["above_chance"]] if "above_chance" in heads else heads.iloc[:0]
    tested = f"{len(heads)} tests, by query position and measure"
    if not len(above):
        return (
            f"no head attends to the referent above chance (0.5) on held-out schemas (0 of the {_distinct(heads)} "
            f"selected heads, {tested})"
        )
    return (
        f"{_distinct(above)} of the {_distinct(heads)} selected heads ({len(above)} of {tested}) attend to the "
        f"referent above chance (0.5) on held-out schemas (Holm p < 0.05 over the {len(heads)} tests and the "
        f"{INTERVAL} above 0.5)"
    )


def lead_head(heads: Any, blind: Sequence[str] = ()) -> tuple[Any | None, bool]:
    """The head a line about attention leads with, and whether it passed: the highest held-out accuracy among the
    tests above chance; when none is, the test ranked first by accuracy on the selection schemas among the query
    positions that can tell twins apart (not in ``blind``); ``None`` when every test is at a blind position."""
    above = heads[heads["above_chance"]] if "above_chance" in heads else heads.iloc[:0]
    if len(above):
        return above.loc[above["test_accuracy"].idxmax()], True
    seeing = heads[~heads["query"].isin(list(blind))]
    if not len(seeing):
        return None, False
    order = "select_accuracy" if "select_accuracy" in seeing else "rank"
    ranked = seeing.sort_values(order, ascending=order == "rank", kind="stable")
    return ranked.iloc[0], False


def blind_queries(twins: dict | None, tolerance: float = 1e-6) -> list[str]:
    """Query positions whose heads give the same mass in both twins of every comparable pair (the largest twin
    difference of any head's mass there, :func:`studies.coreference.attention.twin_difference`, at most
    ``tolerance``): every head's pick there is right in exactly one twin of each pair, 0.5 held out by
    construction. In a causal model these are positions before the switch word."""
    return [
        q
        for q, d in (twins or {}).items()
        if d["pairs_after"] + d["pairs_before"] and max(d["mass_after"], d["mass_before"]) <= tolerance
    ]


def _blind_words(blind: Sequence[str], heads: Any) -> str:
    n = int(heads["query"].isin(list(blind)).sum())
    where = " and ".join(blind)
    return (
        f"every test is from the {where} position, where no head's attention differs between twins, so each "
        f"scores 0.5 by construction ({n} tests)."
    )


def _distinct(table: Any) -> int:
    """Heads, not tests: a head tested by weight and by norm, or from two positions, counts once."""
    return len(set(zip(table["layer"], table["head"], strict=True)))


def head_name(row: Any) -> str:
    """``L17H0`` for a row of the heads table."""
    return f"L{int(row['layer'])}H{int(row['head'])}"


def _against_chance(row: Any) -> str:
    if row["test_ci_high"] < 0.5:
        return "below chance"
    if row["test_ci_low"] > 0.5:
        return "its interval is above chance, but the corrected test does not pass"
    return "at chance"
