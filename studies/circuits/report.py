"""The circuits report: prose with the numbers, the curves, the checks against exact patching, the drawn
circuit with its edge list, and ``results.json``."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure

from interp.circuits import draw_circuit
from interp.report import Report, table_records
from studies.circuits.anatomy import switch_table

TARGET_EDGES, TARGET_FAITHFULNESS, TARGET_PEARSON = 300, 0.85, 0.9
ANCHORS = (
    "On GPT-2 small's gendered-pronoun task the EAP-IG authors report normalised faithfulness of about 0.84 with "
    "89 edges and 0.89 with 190 (EAP: 0.51 and 0.62), and EAP-IG scores correlating with exact edge patching at "
    "Pearson 0.88-0.98 across tasks (EAP: 0.34-0.84)."
)
NAME_ATTENTION = 0.3  # a head "attends to the name" when this much of its read-position attention goes there


def _f(value) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def curves_figure(curves: pd.DataFrame, threshold: float) -> Figure:
    fig = Figure(figsize=(7.0, 4.2))
    ax = fig.add_subplot()
    colours = {"eap": "#1f77b4", "eap-ig": "#d62728"}
    for (method, ranking), part in curves[curves["split"] == "test"].groupby(
        ["method", "ranking"], sort=True
    ):
        part = part.sort_values("edges")
        part = part[part["edges"] > 0]
        style = "-" if ranking == "abs" else "--"
        ax.plot(part["edges"], part["faithfulness"], style, marker="o", ms=3, color=colours[method],
                label=f"{method}, top by {'|score|' if ranking == 'abs' else 'score'} (held out)")  # fmt: skip
    train = curves[curves["split"] == "train"].sort_values("edges")
    if len(train):
        ax.plot(
            train["edges"],
            train["faithfulness"],
            "x",
            color="black",
            ms=4,
            label="scoring pairs (size search)",
        )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(threshold, color="grey", lw=0.8, ls=":")
    ax.axvline(TARGET_EDGES, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("edges in the circuit (after pruning)")
    ax.set_ylabel("faithfulness")
    ax.legend(fontsize=7)
    ax.set_title("Faithfulness against circuit size", fontsize=9)
    return fig


def exact_figure(table: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(8.0, 3.8))
    for k, method in enumerate(("eap", "eap-ig")):
        ax = fig.add_subplot(1, 2, k + 1)
        for sample, colour in (("random", "#7f7f7f"), ("top", "#d62728")):
            part = table[table["sample"] == sample]
            ax.scatter(part["exact"], part[method], s=10, color=colour, label=f"{sample} edges")
        lo = float(min(table["exact"].min(), table[method].min()))
        hi = float(max(table["exact"].max(), table[method].max()))
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.6)
        ax.set_xlabel("exact edge patching")
        ax.set_ylabel(method)
        ax.legend(fontsize=7)
    fig.subplots_adjust(wspace=0.35)
    fig.suptitle("Attribution scores against exact edge patching (same pairs)", fontsize=9)
    return fig


def write_report(report: Report, model, config, results: dict, seconds: float) -> None:
    """The study's report: one function per section, then ``results.json``."""
    _hypothesis_section(report, model, config, results)
    _faithfulness_section(report, config, results)
    _exact_section(report, results)
    circuit = _circuit_section(report, config, results)
    _comparison_sections(report, circuit, results)
    _run_section(report, model, results, seconds)
    _add_results(report, config, results, circuit)
    report.write()


def _hypothesis_section(report: Report, model, config, results: dict) -> None:
    graph, pairs = results["graph"], results["pairs"]
    report.add_section("Hypothesis and metric")
    report.add_text(
        "If pronoun agreement runs through a few paths, a circuit of a few hundred edges, chosen by edge "
        "attribution on some agreement twins, reproduces the model's pronoun preference on other twins. Each twin "
        "pair gives two (clean, corrupted) pairs, one per direction; the metric is the logit difference between "
        "the clean twin's pronoun and the other twin's at the next-token position. A circuit is run with every "
        "edge outside it patched from the corrupted input (effects propagate; the real norms are kept), and "
        "faithfulness is (m(circuit) - m(corrupted)) / (m(full) - m(corrupted)), means over held-out pairs from "
        "schemas the scores never saw. " + ANCHORS
    )
    n_one = sum(not t for t in pairs["test"].two_people)
    report.add_text(
        f"{model.cfg.name or config.model}: {graph} (nodes: the input, {graph.n_layers * graph.n_heads} heads, "
        f"{graph.n_layers} MLPs, the logits; a head reads through its query and its key/value head's keys and "
        f"values). Pairs: {len(pairs['scoring'])} for scoring (of {pairs['available'][0]} available), "
        f"{len(pairs['test'])} held out (of {pairs['available'][1]}; {n_one} one-person, "
        f"{len(pairs['test']) - n_one} two-person), {len(pairs['exact'])} of the scoring pairs for exact edge "
        f"patching. {pairs['dropped']} twin pairs were left out because their twins tokenize to different "
        f"lengths. EAP-IG uses {config.steps} interpolation steps."
    )
    report.add_headline("edges in the graph", graph.n_edges, note=f"{len(graph.nodes)} nodes")


def _faithfulness_section(report: Report, config, results: dict) -> None:
    curves, areas = results["curves"], results["areas"]
    report.add_section("Faithfulness against circuit size")
    caption = "Held-out pairs; x is edges kept after pruning to paths from input to logits."
    report.add_figure("faithfulness_curves", curves_figure(curves, config.threshold), caption=caption)
    report.add_table("curves", curves, caption="Every evaluated circuit", max_rows=60)
    report.add_table("areas", areas, caption="MIB's CPR (area under the curve, higher is better) and CMD "
                     "(area between the curve and 1, lower is better), over the fraction of edges kept at MIB's "
                     "ten sizes (0.1% to 100%)")  # fmt: skip
    report.add_text(_target_text(curves, config.method))


def _exact_section(report: Report, results: dict) -> None:
    correlations = results["correlations"]
    report.add_section("Attribution against exact edge patching")
    report.add_figure("attribution_vs_exact", exact_figure(results["exact"]),
                      caption="Most uniformly sampled edges sit near 0; the strongest edges spread out")  # fmt: skip
    report.add_table(
        "attribution_vs_exact", correlations, caption="Correlation with exact edge patching, per sample"
    )
    report.add_table(
        "exact_edges", results["exact"], caption="Edges patched exactly, with their attribution scores"
    )
    report.add_text(_exact_text(correlations))


def _circuit_section(report: Report, config, results: dict):
    chosen, method = results["chosen"], config.method
    scores = results["scores"].all[method]
    report.add_section("The circuit")
    circuit = chosen.circuit
    caption = "Layers bottom to top; width |score|; colour: the input fed; dashed: negative score"
    figure = draw_circuit(circuit, scores, title=f"{method}: {circuit.n_edges} edges")
    report.add_figure("circuit", figure, caption=caption)
    edges = pd.DataFrame(circuit.to_dict(scores.scores)["edges"], columns=["source", "input", "score"])
    report.add_table(
        "circuit_edges", edges, caption="The circuit's edges and their scores (also in results.json)"
    )
    report.add_text(
        f"The smallest top-n circuit by |{method} score| reaching faithfulness {config.threshold} on the scoring "
        f"pairs keeps {circuit.n_edges} edges (top {chosen.requested} before pruning) and {len(circuit.nodes)} "
        f"nodes: faithfulness {_f(chosen.faithfulness_train)} on the scoring pairs and "
        f"{_f(chosen.faithfulness_test)} on the held-out pairs."
    )
    report.add_headline("drawn circuit: edges", circuit.n_edges)
    report.add_headline("drawn circuit: held-out faithfulness", round(chosen.faithfulness_test, 3))
    return circuit


def _comparison_sections(report: Report, circuit, results: dict) -> None:
    report.add_section("Heads against the coreference study's")
    report.add_table("heads", results["heads"], caption="The circuit's heads and the coreference heads")
    report.add_text(_heads_text(results["heads"]))

    report.add_section("One person against two")
    switch = results["switch"]
    report.add_table(
        "switch",
        switch_table(switch),
        caption="Held-out twin pairs: the switch sensitivity (the she - he preference in one twin minus the "
        "other's, toward the expected pronoun; 0 is none) and bias (the mean preference over both twins) of the "
        "full model and of the circuit alone, each with a 95% sign-flip interval over twin pairs; right in both "
        "twins against chance 0.25",
    )
    report.add_text(_switch_text(switch))
    report.add_table(
        "people", results["people"], caption="Held-out pairs, by the number of people in the prompt"
    )
    report.add_text(_people_text(results["people"]))

    report.add_section("Against the GPT-2 small gendered-pronoun circuit")
    report.add_table(
        "mlp_positions", results["mlps"], caption="Share of each circuit MLP's |attribution| by position role"
    )
    report.add_text(_structure_text(circuit, results))


def _run_section(report: Report, model, results: dict, seconds: float) -> None:
    report.add_section("Run")
    stages = ", ".join(f"{k} {v:.0f} s" for k, v in results["timer"].items())
    report.add_text(
        f"Wall time {seconds:.0f} s on {model.device} ({model.dtype}): {stages}. It is kept out of results.json "
        "so that two runs with one seed give the same bytes."
    )


def _add_results(report: Report, config, results: dict, circuit) -> None:
    graph, pairs, chosen, method = results["graph"], results["pairs"], results["chosen"], config.method
    curves, areas, correlations = results["curves"], results["areas"], results["correlations"]
    report.add_results(
        {
            "graph": {"nodes": len(graph.nodes), "edges": graph.n_edges, "inputs": len(graph.inputs)},
            "curve": table_records(
                curves[["method", "ranking", "split", "requested", "edges", "faithfulness"]]
            ),
            "areas": table_records(areas),
            "circuit": {
                "method": method,
                "requested": chosen.requested,
                "n_edges": circuit.n_edges,
                "edges": [list(e) for e in circuit.edges],
                "faithfulness_train": chosen.faithfulness_train,
                "faithfulness_test": chosen.faithfulness_test,
                "nodes": circuit.nodes,
            },
            "attribution_vs_exact": table_records(correlations),
            "heads": table_records(results["heads"]),
            "people": table_records(results["people"]),
            "switch": {
                label: {run: summary.to_json() for run, summary in runs.items()}
                for label, runs in results["switch"].items()
            },
            "mlp_positions": table_records(results["mlps"]),
            "pairs": {
                "scoring": len(pairs["scoring"]),
                "test": len(pairs["test"]),
                "exact": len(pairs["exact"]),
                "dropped_twin_pairs": pairs["dropped"],
            },
            "metric": {
                m: {"clean": s.clean_metric, "corrupt": s.corrupt_metric}
                for m, s in results["scores"].all.items()
            },
        }
    )


def _at_most(curves: pd.DataFrame, method: str, edges: int):
    part = curves[(curves["method"] == method) & (curves["split"] == "test") & (curves["ranking"] == "abs")]
    part = part[part["edges"] <= edges]
    return part.loc[part["faithfulness"].idxmax()] if len(part) else None


def _target_text(curves: pd.DataFrame, method: str) -> str:
    lines = []
    for m in ("eap", "eap-ig"):
        best = _at_most(curves, m, TARGET_EDGES)
        if best is None:
            continue
        met = "meets" if best["faithfulness"] >= TARGET_FAITHFULNESS else "falls short of"
        lines.append(
            f"- {m}: best held-out faithfulness with at most {TARGET_EDGES} edges is {_f(best['faithfulness'])} "
            f"({int(best['edges'])} edges), which {met} the target of {TARGET_FAITHFULNESS}."
        )
    test = curves[(curves["split"] == "test") & (curves["ranking"] == "abs") & (curves["method"] == method)]
    reach = test[test["faithfulness"] >= TARGET_FAITHFULNESS].sort_values("edges")
    if len(reach):
        lines.append(
            f"- {method} first reaches {TARGET_FAITHFULNESS} on held-out pairs at {int(reach['edges'].iloc[0])} edges."
        )
    signed = curves[(curves["split"] == "test") & (curves["ranking"] == "signed")]
    if len(signed):
        peak = signed.loc[signed["faithfulness"].idxmax()]
        lines.append(
            f"- Ranked by signed score (positive edges only, MIB's choice for CPR) circuits overshoot: up to "
            f"{_f(peak['faithfulness'])} ({peak['method']}, {int(peak['edges'])} edges), because leaving out the "
            "edges that work against the answer makes the circuit prefer it more than the model does. Such a "
            "circuit is not faithful, only sufficient."
        )
    return "\n".join(lines)


def _exact_text(correlations: pd.DataFrame) -> str:
    lines = []
    for row in correlations.itertuples():
        if row.sample == "random":
            met = "meets" if row.pearson >= TARGET_PEARSON else "falls short of"
            if row.method == "eap":
                met = "(no target for EAP)"
            else:
                met = f"{met} the target of {TARGET_PEARSON}"
            lines.append(f"- {row.method} on {row.edges_checked} uniformly sampled edges: Pearson {_f(row.pearson)}, "
                         f"Spearman {_f(row.spearman)} {met}.")  # fmt: skip
        elif row.sample == "top":
            lines.append(f"- {row.method} on the {row.edges_checked} strongest edges: Pearson {_f(row.pearson)}, "
                         f"Spearman {_f(row.spearman)}.")  # fmt: skip
    lines.append(
        "Most uniformly sampled edges carry almost nothing, so their correlation measures how well small effects "
        "are ranked; the strongest edges are where selection decides."
    )
    return "\n".join(lines)


def _heads_text(heads: pd.DataFrame) -> str:
    refs = heads[heads["reference"]]
    found = [r.head for r in refs.itertuples() if r.in_circuit]
    missed = [r.head for r in refs.itertuples() if not r.in_circuit]
    inside = heads[heads["in_circuit"]].sort_values("score_out", ascending=False)
    writing = inside[inside["edges_out"] > 0]
    top = ", ".join(f"{r.head} ({_f(r.score_out)})" for r in writing.head(6).itertuples())
    parts = [f"The circuit touches {len(inside)} heads ({len(inside) - len(writing)} of them only because they share "
             f"a key/value head that a kept edge feeds); {len(writing)} write through a kept edge, the strongest "
             f"by summed |score| of their outgoing edges: {top or 'none'}."]  # fmt: skip
    if found:
        parts.append(
            f"Of the coreference study's heads, {', '.join(found)} {'is' if len(found) == 1 else 'are'} in the circuit."
        )
    if missed:
        parts.append(
            f"Not in the circuit: {', '.join(missed)}; the edge scores do not rank their paths among the top."
        )
    return " ".join(parts)


def _switch_text(switch: dict) -> str:
    """The primary numbers in words: the full model's and the circuit's switch sensitivity and bias, per prompt
    set."""
    parts = []
    for label, runs in switch.items():
        for run, who in (("full", "the full model"), ("circuit", "the circuit alone")):
            if run in runs:
                parts.append(f"{label.capitalize()}, {who}: " + runs[run].verdict(who))
    return "\n\n".join(parts)


def _people_text(people: pd.DataFrame) -> str:
    rows = {r.prompts: r for r in people.itertuples()}
    parts = []
    for label in ("one person", "two people"):
        r = rows.get(label)
        if r is not None:
            parts.append(
                f"{label}: {r.pairs} pairs, faithfulness {_f(r.faithfulness)}, the full model prefers the clean "
                f"pronoun in {r.accuracy_full:.0%} [{r.accuracy_full_low:.0%}, {r.accuracy_full_high:.0%}] of "
                f"pairs and the circuit alone in {r.accuracy_circuit:.0%} [{r.accuracy_circuit_low:.0%}, "
                f"{r.accuracy_circuit_high:.0%}] (chance 50%; 95% intervals over twin pairs)."
            )
    if "one person" in rows and "two people" in rows:
        gap = rows["one person"].faithfulness - rows["two people"].faithfulness
        parts.append(
            "With two people the circuit must also pick the right name; "
            + (
                f"it is less faithful there (by {_f(gap)})."
                if gap > 0.05
                else "it is about as faithful there."
            )
        )
    return " ".join(parts)


def _structure_text(circuit, results: dict) -> str:
    edges = circuit.edges
    from_input = [t for s, t in edges if s == "input"]
    into_logits = [s for s, t in edges if t == "logits"]
    heads = results["heads"]
    attend = heads[heads["in_circuit"] & (heads["attention_to_name"] >= NAME_ATTENTION)]
    mlps = results["mlps"]
    roles = ["name", "next", "between", "final"]
    main = mlps[roles].astype(float).idxmax(axis=1) if len(mlps) else pd.Series(dtype=str)
    by_role = {role: list(mlps["mlp"][main == role]) for role in roles}
    kinds = pd.Series([t.rsplit(".", 1)[-1] if "." in t else t for t in from_input]).value_counts().to_dict()
    lines = [
        "GPT-2 small's gendered-pronoun circuit was reported as: the name, read by heads that attend to it from "
        "the end of the prompt, then MLPs at the verb, then late heads and MLPs writing the pronoun. Here:",
        f"- The name enters through {len(from_input)} edges from the input "
        f"({', '.join(f'{v} {k}' for k, v in kinds.items()) or 'none'}).",
        f"- Heads of the circuit that put at least {NAME_ATTENTION:.0%} of the read position's attention on the "
        f"name: {', '.join(f'{r.head} ({r.attention_to_name:.0%})' for r in attend.itertuples()) or 'none'}.",
        "- The circuit's MLPs by the position where most of their attribution lies: at the name "
        f"{', '.join(by_role['name']) or 'none'}; at the token after it (the verb in most prompts) "
        f"{', '.join(by_role['next']) or 'none'}; further between {', '.join(by_role['between']) or 'none'}; at "
        f"the final position {', '.join(by_role['final']) or 'none'}.",
        f"- Nodes writing into the logits: {', '.join(into_logits) or 'none'}.",
    ]
    missing = []
    if not len(attend):
        missing.append("no head of the circuit attends mostly to the name")
    if not by_role["next"]:
        missing.append("no MLP of the circuit acts mainly at the token after the name, so the 'MLPs at the verb' "
                       "stage is not found")  # fmt: skip
    if missing:
        lines.append("Not found: " + "; ".join(missing) + ".")
    lines.append(
        "Edges are summed over positions, so the graph alone cannot say at which token an edge acts; the MLP roles "
        "come from attribution patching of each MLP's output by position on the held-out pairs."
    )
    return "\n".join(lines)
