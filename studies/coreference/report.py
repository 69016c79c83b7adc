"""The coreference report: prose with the numbers, tables, figures and ``results.json``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from interp.report import Report, figures, table_records
from studies.coreference.behaviour import LABELS, PRIMARY, verdict
from studies.coreference.findings import (
    INTERVAL,
    add_findings,
    blind_queries,
    head_counts,
    head_name,
    lead_head,
    sensitivity_line,
)
from studies.coreference.measure import BY
from studies.coreference.picture import SEED
from studies.coreference.report_data import data_section
from studies.coreference.sensitivity import switch_table

N_EXAMPLES = 6


def _num(value) -> str:
    return "not stored" if value is None else f"{value:.3g}"


def write_report(report: Report, model, config, results: Sequence, picture: dict, seconds: float) -> None:
    name = config.model
    lm = model.cfg.causal and model.cfg.lm_head != "none"
    report.add_section("Hypothesis and metric")
    report.add_text(
        "A model that resolves a pronoun moves its preference toward the right candidate when the switch word "
        "changes (twins differ in one switch word and have opposite answers), attends to the referent from "
        "positions that can see the switch word, carries the twin difference causally through those heads, "
        "and holds the referent linearly decodable. The primary measure is the switch sensitivity: per twin "
        "pair, the preference for the first candidate (or pronoun) in one twin minus that in the other, signed "
        "toward the expected answer (0 is no sensitivity), tested by sign flips over pairs; the model's bias, "
        "the mean preference over both twins, is reported apart, and a pair is right in both twins only when "
        "half its sensitivity exceeds its bias. Accuracies carry 95% bootstrap intervals over schemas (twins "
        "together); chance is 0.5 (0.25 for pair accuracy), and rules that ignore the switch word score 0.5 "
        "accuracy and 0 pair accuracy by construction."
    )
    if not lm:
        report.add_text(
            f"{name} is an encoder without a language-model head: there is no substitution or question "
            "scoring and no next-pronoun prediction for it (no behavioural accuracy). The report covers "
            "attention, patching by position and by head (the metric is the final stream at the pronoun or "
            "last token, projected on the twin difference) and probes."
        )
    out: dict = {"model": name, "lm_scoring": lm}
    for result in results:
        out[result.name] = _data_section(report, model, name, lm, result)
    out["seed_picture"] = _picture_section(report, model, picture)
    add_findings(report, name, results, model.cfg.causal)
    report.add_section("Run")
    report.add_text(
        f"Wall time {seconds:.0f} s on {model.device} ({model.dtype}); the manifest records it too. It is "
        "kept out of results.json so that two runs with one seed give the same bytes."
    )
    report.add_results(out)
    report.write()


def _data_section(report: Report, model, name: str, lm: bool, result) -> dict:
    a, label = result.analysis, result.name
    kind = result.kind
    out: dict = {"kind": kind, "n_items": len(result.records), "items": result.records}
    if result.data is not None:
        data_section(report, result, out)
    report.add_section(f"Behaviour: {label}")
    if "behaviour" in a:
        if a.get("switch"):
            _switch_section(report, a["switch"], name, label, kind)
            out["switch"] = {method: s.to_json() for method, s in a["switch"].items()}
        table = a["behaviour"]
        _behaviour_section(report, table, name, label, kind)
        out["behaviour"] = table_records(table)
        examples = pd.DataFrame(result.records[:N_EXAMPLES]).drop(columns=["correct"], errors="ignore")
        report.add_table(
            f"{label}_examples", examples, caption=f"The first {N_EXAMPLES} items by id (no selection)"
        )
    else:
        report.add_text(f"No behavioural scores: {name} has no language-model head.")
    _attention_section(report, result, out)
    _causal_section(report, lm, result, out)
    report.add_section(f"Probes: {label}")
    probes = a["probes"]
    if not len(probes):
        reason = a.get("probes_skipped") or "probes were not run"
        report.add_text(reason[:1].upper() + reason[1:] + ".")
        out["probes"] = []
        return out
    report.add_table(
        f"{label}_probes", probes, caption="Per-layer probe, split by twin pair; control = shuffled labels"
    )
    curves, bands = {}, {}
    for role, frame in probes.groupby("role", sort=False):
        curves[f"{role}"] = frame["accuracy"].to_numpy()
        bands[f"{role}"] = (frame["ci_low"].to_numpy(), frame["ci_high"].to_numpy())
        curves[f"{role} (control)"] = frame["control_accuracy"].to_numpy()
    layers = sorted(probes["layer"].unique())
    fig = figures.line_plot(
        layers,
        curves,
        ci=bands,
        title=f"Probe for the referent ({label})",
        ylabel="test accuracy",
        baseline=float(probes["chance"].iloc[0]),
        baseline_label="majority class",
    )
    report.add_figure(f"{label}_probes", fig)
    best = probes.loc[probes["accuracy"].idxmax()]
    report.add_text(
        f"Best probe: {best['role']} after layer {int(best['layer'])}, {best['accuracy']:.2f} "
        f"[{best['ci_low']:.2f}, {best['ci_high']:.2f}] on {int(best['n_test'])} held-out items "
        f"(control {best['control_accuracy']:.2f}, majority class {best['chance']:.2f})."
    )
    out["probes"] = table_records(probes)
    return out


def _switch_section(report: Report, summaries: dict, name: str, label: str, kind: str) -> None:
    """The primary measure: switch sensitivity and bias per scoring method (resolution) or prompt set
    (agreement), their table, the verdict of the primary one in words, and the headline card."""
    primary = LABELS[PRIMARY] if kind == "resolution" else next(iter(summaries))
    main = summaries.get(primary) or next(iter(summaries.values()))
    report.add_table(
        f"{label}_switch",
        switch_table(summaries),
        caption=(
            "Switch sensitivity (per twin pair, the preference for the first candidate or pronoun in one twin "
            "minus the other's, signed toward the expected answer; 0 is no sensitivity) and bias (the mean "
            "preference over both twins), each with a 95% sign-flip interval and p over twin pairs; right in "
            "both twins against chance 0.25 (exact binomial)"
        ),
        digits=3,
    )
    report.add_text(f"{label} ({primary}): " + main.verdict(name))
    sens = main.sensitivity
    report.add_headline(
        f"{label}: switch sensitivity ({primary})",
        round(sens.estimate, 3),
        ci=(sens.interval.low, sens.interval.high) if np.isfinite(list(sens.interval)).all() else None,
        note=(
            f"{main.unit} toward the expected answer, 0 is none (chance); p = {sens.p_value:.2g} by sign flips "
            f"over {sens.n_units} twin pairs; bias {main.bias.estimate:+.2f}"
        ),
    )


def _behaviour_section(report: Report, table: pd.DataFrame, name: str, label: str, kind: str) -> None:
    """The behaviour table, a verdict per scoring method against its chance level, and the headline card
    (which carries the chance level too)."""
    bos = "a BOS token prepended" if bool(table["bos_prepended"].iloc[0]) else "no BOS token"
    main = table[table["method"] == LABELS[PRIMARY]].iloc[0] if kind == "resolution" else table.iloc[0]
    chance = f"chance {float(main['chance']):g}"
    caption = (
        f"Accuracy with 95% bootstrap intervals over schemas ({chance}; pair accuracy: Wilson over pairs, "
        f"chance 0.25) and lm-eval-harness's stderr; texts read with {bos}"
    )
    report.add_table(f"{label}_behaviour", table, caption=caption, digits=3)
    sentences = [
        verdict(row, name, f"{label} ({row['method']})")
        for _, row in table.iterrows()
        if not row["method"].startswith("baseline")
    ]
    report.add_text("\n\n".join(sentences))
    primary = "; the primary metric" if kind == "resolution" else ""
    report.add_headline(
        f"{label}: {main['method']} accuracy",
        round(float(main["accuracy"]), 3),
        ci=(float(main["ci_low"]), float(main["ci_high"])),
        note=f"95% bootstrap over schemas, {chance}{primary}",
    )


def _significant(heads, query: str, shape: tuple[int, int]) -> np.ndarray:
    """``[layer, head]`` True for the heads whose held-out test by weight passes after Holm correction."""
    marked = np.zeros(shape, dtype=bool)
    if len(heads) and "p_holm" in heads:
        rows = heads[(heads["query"] == query) & (heads["by"] == "weight") & (heads["p_holm"] < 0.05)]
        marked[rows["layer"].to_numpy(int), rows["head"].to_numpy(int)] = True
    return marked


def _attention_section(report: Report, result, out: dict) -> None:
    a, label = result.analysis, result.name
    report.add_section(f"Attention: {label}")
    acc = a["head_accuracy"]  # [query, by, layer, head]
    key = (
        "the referent (more mass than on the other candidate)"
        if result.kind == "resolution"
        else "the antecedent rather than the distractor (two-person prompts)"
    )
    report.add_text(
        f"Antecedent accuracy of each head: the fraction of items where it gives more mass to {key}."
    )
    heads = a["heads"]
    for qi, query in enumerate(result.queries):
        fig = figures.heatmap_layer_head(
            acc[qi, 0],
            title=f"{label}: from {query}, by weight",
            cbar_label="antecedent accuracy",
            center=0.5,
            vmin=0.0,
            vmax=1.0,
            mark=_significant(heads, query, acc.shape[-2:]),
            mark_label="outlined: held-out accuracy differs from 0.5 (sign flips over schemas, Holm p < 0.05)",
        )
        report.add_figure(f"{label}_heads_{query}", fig)
    report.add_table(
        f"{label}_heads",
        heads,
        caption=(
            "Top heads selected on half the schemas, tested on the other half (p: sign flips over the held-out "
            "schemas, twins as one unit; Holm over every test in the table)"
        ),
    )
    out["head_accuracy"] = {
        q: {b: np.round(acc[qi, bi], 4).tolist() for bi, b in enumerate(BY)}
        for qi, q in enumerate(result.queries)
    }
    out["heads"] = table_records(heads)
    if a.get("heads_skipped"):
        report.add_text(f"No held-out head test: {a['heads_skipped']}.")
    if len(heads):
        text = _heads_text(
            heads, blind_queries(a.get("twins")), result.measured and "final" in result.queries
        )
        extra = sensitivity_line(heads)
        report.add_text(text + ("\n\n" + extra if extra else ""))
    if "twins" in a:
        lines = []
        for query, d in a["twins"].items():
            lines.append(
                f"- from {query}: pairs with the switch after the pronoun ({d['pairs_after']}): largest twin "
                f"difference of any head's mass {d['mass_after']:.3g}, "
                f"of the stream {_num(d['resid_after'])}; "
                f"switch before the pronoun ({d['pairs_before']}): {d['mass_before']:.3g} and "
                f"{_num(d['resid_before'])}."
            )
        causal = result.measured and "final" in result.queries
        intro = (
            "Which positions can carry the distinction? In a causal model a position before the switch word "
            "cannot see it: its activations are identical across twins, so every head's pick is right for "
            "exactly one twin of such a pair."
            if causal
            else "In an encoder every position sees the switch word."
        )
        report.add_text(intro + "\n\n" + "\n".join(lines))
        out["twins"] = a["twins"]


def _heads_text(heads, blind: list[str], causal: bool) -> str:
    """The held-out test in words: the counts the summary gives, then the head it names (the best that passed,
    else the first ranked at a position that can see the switch word), then the positions that cannot."""
    text = head_counts(heads)
    text = text[:1].upper() + text[1:] + "."
    top, passed = lead_head(heads, blind)
    if top is not None:
        which = (
            "The highest held-out accuracy among them"
            if passed
            else "Ranked first on the selection schemas"
            + (" among the positions that can see the switch word" if blind else "")
        )
        text += (
            f" {which}: {head_name(top)} from {top['query']} ({top['by']}), held out {top['test_accuracy']:.2f} "
            f"[{top['test_ci_low']:.2f}, {top['test_ci_high']:.2f}] on {int(top['test_n'])} items of "
            f"{int(top['test_schemas'])} schemas (chance 0.5; {INTERVAL}; Holm p = {top['p_holm']:.3g})."
        )
    if blind:
        tests = int(heads["query"].isin(blind).sum())
        where = " and the ".join(blind)
        reason = " (in a causal model, they come before the switch word)" if causal else ""
        text += (
            f" From the {where} position no head's attention differs between twins{reason}, so each of its {tests} "
            "tests scores 0.50 by construction: they say nothing about the referent and are not ranked here."
        )
    return text


def _causal_section(report: Report, lm: bool, result, out: dict) -> None:
    a, label = result.analysis, result.name
    report.add_section(f"Causal: {label}")
    report.add_text(
        f"Twin pairs that tokenize to the same length: {a['pairs_kept']} of {a['pairs_total']}; patched: the "
        f"first {a['pairs_used']} of them. Recovery = "
        "sum(patched - corrupt) / sum(clean - corrupt) over pairs "
        f"(clean - corrupt summed: {a.get('resid_denominator', float('nan')):.3g})."
    )
    out.update(pairs_kept=a["pairs_kept"], pairs_total=a["pairs_total"], pairs_used=a["pairs_used"])
    if "resid" not in a:
        return
    resid = a["resid"]  # [layer, role]
    fig = figures.heatmap_layer_head(
        resid, title=f"{label}: resid_pre patching (attribution), by role", cbar_label="recovery", center=0.0
    )
    ax = fig.axes[0]
    ax.set_xticks(range(len(a["roles"])))
    ax.set_xticklabels(a["roles"], rotation=45, ha="right", fontsize=7)
    ax.set_xlabel("position role")
    report.add_figure(f"{label}_resid_patching", fig)
    report.add_table(
        f"{label}_resid_exact",
        a["resid_exact"],
        caption="Per pair: top slots by attribution, re-measured exactly",
    )
    fig = figures.heatmap_layer_head(
        a["z"], title=f"{label}: hook_z patching per head (attribution)", cbar_label="recovery", center=0.0
    )
    report.add_figure(f"{label}_head_patching", fig)
    report.add_table(
        f"{label}_head_exact", a["z_exact"], caption="Top heads by pooled attribution, patched exactly"
    )
    if len(a["z_exact"]):
        top = a["z_exact"].iloc[0]
        report.add_text(
            f"Patching head L{int(top['layer'])}H{int(top['head'])}'s output from one twin into the other "
            f"recovers "
            f"{top['patched']:.2f} of the twin difference (attribution estimate {top['attribution']:.2f})."
        )
    out["resid_recovery"] = {role: np.round(resid[:, i], 4).tolist() for i, role in enumerate(a["roles"])}
    out["resid_exact"] = table_records(a["resid_exact"])
    out["head_recovery"] = np.round(a["z"], 4).tolist()
    out["head_exact"] = table_records(a["z_exact"])


def _picture_section(report: Report, model, picture: dict) -> dict:
    report.add_section("The seed's picture")
    diff = picture["max_twin_diff_it"]
    report.add_text(
        f'{SEED[0]!r} versus {SEED[1]!r}. Largest twin difference of the stream at "it" over all layers: '
        f"{diff:.3g}"
        + (" (identical: the switch word comes after the pronoun)." if model.cfg.causal else ".")
    )
    n = picture["norms"].shape[1]
    fig = figures.line_plot(
        list(range(n)),
        {
            "|stream| at it": picture["norms"][0],
            "twin difference at it": picture["twin_diff"]["it"],
            "twin difference at the full stop": picture["twin_diff"]["end"],
        },
        title="Residual stream entering each layer (last point: after the last)",
        xlabel="layer",
        ylabel="L2 norm",
    )
    report.add_figure("seed_stream", fig)
    for (layer, head), pattern in picture["patterns"].items():
        tokens = picture["tokens"][0]
        fig = figures.attention_heatmap(
            pattern[0][: len(tokens), : len(tokens)], tokens, title=f"L{layer}H{head} on the 'tired' sentence"
        )
        report.add_figure(f"seed_pattern_L{layer}H{head}", fig)
    report.add_table(
        "seed_sources", picture["sources"], caption="Top three source tokens of each head's write, by norm"
    )
    out = {
        "tokens": picture["tokens"],
        "max_twin_diff_it": diff,
        "norms": np.round(picture["norms"], 4).tolist(),
        "sources": table_records(picture["sources"]),
    }
    if picture["lens"] is not None:
        report.add_table(
            "seed_logit_lens", picture["lens"], caption='Logit lens at "it" (tired sentence)', max_rows=40
        )
        out["logit_lens"] = table_records(picture["lens"])
    return out
