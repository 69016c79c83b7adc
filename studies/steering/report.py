"""The steering study's report: headline numbers, figures against layer and scale, and what the numbers say.

Every sentence that states a result is built from the measured numbers, so the prose and the tables agree.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from interp.report import Report, figures
from studies.steering.findings import findings_section, focus_section, summary_row
from studies.steering.measure import KINDS, UNITS, bootstrap_mean

WORDS = {
    "feminine": re.compile(r"\b(she|her|hers|herself)\b", re.IGNORECASE),
    "masculine": re.compile(r"\b(he|him|his|himself)\b", re.IGNORECASE),
}


def _dense_ticks(fig) -> None:
    """Layer labels that do not run into each other when neighbouring layers are all shown."""
    for label in fig.axes[0].get_xticklabels():
        label.set_rotation(90)
        label.set_fontsize(7)


def write_report(report: Report, result, seconds: float) -> None:
    """Fill ``report`` from a :class:`~studies.steering.study.SteeringResult` and write it."""
    cfg, summary = result.config, result.flip_summary
    scale = cfg.compare_scale
    _headline(report, result)
    report.add_section(
        "Question",
        "Does adding a she-minus-he direction, found as the mean difference between agreement twins, to the "
        "stream at the prediction position flip the pronoun the model prefers on held-out prompts? At which "
        "layers, how much more than a random direction of the same norm, at what cost to the next-token "
        "distribution elsewhere, and is it best where activation patching found the agreement signal "
        f"(heads L25H2 and L26H2 in SmolLM2-135M, which write into the streams entering blocks 26 and 27)?\n\n"
        "Method: directions at `blocks.L.hook_resid_pre` (the stream entering block L) at the last prompt "
        "token, averaged over the twin pairs of half the schemas; the other half is steered at its last "
        "token toward the pronoun that does not agree, at multiples of the direction itself (scale 1 moves a "
        "prompt by the full mean difference). Flip fractions count the held-out items the unsteered model "
        "gets right; shifts are in logits toward the other pronoun (both with 95% bootstrap "
        f"intervals over schemas, {cfg.n_boot} resamples). Each layer's control is {cfg.n_random} random "
        "Gaussian direction(s) rescaled to the direction's norm.",
    )
    _data_section(report, result)
    for kind in result.kinds:
        _flip_section(report, result, kind)
    _stream_section(report, result)
    focus_section(report, result)
    _fluency_section(report, result)
    _continuation_section(report, result)
    _norms_section(report, result)
    findings_section(report, result)
    report.add_results(
        {
            "layers": list(result.layers),
            "focus": list(result.focus),
            "compare_scale": scale,
            "best_layer": result.best,
            "counts": result.counts,
            "flips": summary.to_dict(orient="records"),
            "fluency": result.fluency_summary.to_dict(orient="records"),
            "continuations": result.continuations.to_dict(orient="records"),
            "timings_s": {k: round(v, 1) for k, v in result.timings.items()},
            "switch": {k: (None if v is None else v.to_json()) for k, v in result.switch.items()},
            "stream_scales": list(cfg.stream_scales),
            "stream_norms": {k: {str(layer): n for layer, n in v.items()} for k, v in result.norms.items()},
            "stream_flips": result.stream_summary.to_dict(orient="records"),
            "comparisons": result.comparisons.to_dict(orient="records"),
            "corrections": {u: c.to_json() for u, c in result.corrections.items()},
            "profile": _profile(result),
        }
    )
    report.add_section("Run", f"Measured in {seconds:.0f} s wall (this run), on one thread.")
    report.write()


def _headline(report: Report, result) -> None:
    summary, scale = result.flip_summary, result.config.compare_scale
    note = f"held-out items the model gets right, steered ×{scale:g} at the last token; 95% bootstrap over schemas"
    for kind in result.kinds:
        label, best = KINDS[kind], result.best[kind]
        row = summary_row(summary, kind, best, "direction", scale)
        rand = summary_row(summary, kind, best, "random", scale)
        report.add_headline(f"{label}: best layer", f"L{best}", note=f"most flips at ×{scale:g}")
        report.add_headline(
            f"{label} flips at L{best}", row.flip, ci=(row.flip_low, row.flip_high), note=note
        )
        report.add_headline(
            f"random direction, {label} norm, flips at L{best}",
            rand.flip,
            ci=(rand.flip_low, rand.flip_high),
            note=note,
        )
    kind = result.kinds[0]
    for f in result.focus:
        if f in result.layers:
            row = summary_row(summary, kind, f, "direction", scale)
            report.add_headline(
                f"{KINDS[kind]} flips entering L{f}", row.flip, ci=(row.flip_low, row.flip_high), note=note
            )
    fluency = result.fluency_summary
    best = result.best[kind]
    kl = fluency[(fluency.kind == kind) & (fluency.layer == best) & (fluency.control == "direction")]
    kl = kl[kl.scale == scale].iloc[0]
    report.add_headline(
        f"KL on neutral text at L{best}, ×{scale:g}",
        kl.kl,
        ci=(kl.kl_low, kl.kl_high),
        unit="nats",
        note="next token after neutral prompts; 95% bootstrap over prompts",
    )


def _data_section(report: Report, result) -> None:
    rows = []
    base = result.flips.drop_duplicates(["kind", "item"])
    for kind in result.kinds:
        part = base[base.kind == kind]
        low, high = bootstrap_mean(
            part.correct.to_numpy(float), part.schema.to_numpy(), result.config.n_boot, result.config.seed
        )
        rows.append(
            {
                "direction": KINDS[kind],
                **result.counts[kind],
                "unsteered_accuracy": float(part.correct.mean()),
                "ci_low": low,
                "ci_high": high,
                "chance": 0.5,
            }
        )
    report.add_section(
        "Data",
        "The agreement twins, split by schema: directions from one half, everything else measured on the "
        "other. First, what the unsteered model does on the held-out twin pairs: its switch sensitivity (the "
        "preference for the first pronoun in one twin minus that in the other, toward the agreeing pronoun; 0 "
        "is none), tested by sign flips over pairs with its 95% interval, and its bias (the mean preference over "
        "both twins). Unsteered accuracy is the fraction of held-out items whose agreeing pronoun gets the higher "
        "logit (chance 0.5; 95% bootstrap over schemas, a schema's twins together); only those items can flip.",
    )
    for kind in result.kinds:
        switch = result.switch.get(kind)
        if switch is not None:
            report.add_text(f"{KINDS[kind]}: " + switch.verdict("the unsteered model"))
    report.add_table("data", pd.DataFrame(rows))


def _flip_section(report: Report, result, kind: str) -> None:
    summary, label = result.flip_summary, KINDS[kind]
    part = summary[summary.kind == kind]
    layers = sorted(part.layer.unique())
    report.add_section(f"Flips and shifts: {label}")
    for key, ylabel, name in (("flip", "fraction flipped", "flips"), ("shift", "logit shift", "shifts")):
        ys, ci = {}, {}
        for control in ("direction", "random"):
            for scale in result.config.scales:
                if control == "random" and scale != max(result.config.scales):
                    continue
                rows = part[(part.control == control) & (part.scale == scale)].set_index("layer").loc[layers]
                curve = f"{control} ×{scale:g}"
                ys[curve] = rows[key].to_numpy()
                ci[curve] = (rows[f"{key}_low"].to_numpy(), rows[f"{key}_high"].to_numpy())
        fig = figures.line_plot(
            layers,
            ys,
            ci=ci,
            title=f"{label}: {ylabel} by layer (stream entering block L)",
            xlabel="layer L (blocks.L.hook_resid_pre)",
            ylabel=ylabel,
            baseline=0.0 if key == "shift" else None,
            baseline_label="no change",
        )
        _dense_ticks(fig)
        report.add_figure(
            f"{kind}_{name}",
            fig,
            caption="Bands: 95% bootstrap intervals over schemas. The random control "
            f"is shown at the largest scale (×{max(result.config.scales):g}), where it moves the most.",
        )
    report.add_table(
        f"{kind}_flips",
        part.sort_values(["control", "scale", "layer"]),
        caption=f"{label}: per layer, control and scale.",
        max_rows=200,
    )


def _stream_section(report: Report, result) -> None:
    """The layer profile in units of the stream's norm, and the corrected comparisons against random in both
    units."""
    summary, scales = result.stream_summary, result.config.stream_scales
    kind = result.kinds[0]
    ratios = {
        layer: result.directions[kind][layer].norm / result.norms[kind][layer]
        for layer in result.layers
        if result.directions[kind][layer].norm > 0
    }
    first, last = min(ratios), max(ratios)
    report.add_section(
        "The layer profile in units of the stream",
        "In its own units a direction's push grows with depth, because the direction does (the table under "
        f"Directions): for {KINDS[kind]}, scale 1 adds {ratios[first]:.1%} of the stream's mean norm entering "
        f"block {first} and {ratios[last]:.1%} entering block {last}. Here "
        "the direction and its random controls are rescaled to the mean norm of the stream at the last prompt "
        "token of the build twins at that layer, and steered at "
        + ", ".join(f"{s:g}" for s in scales)
        + " times it: the same push, relative to what is already in the stream, at every layer. A layer where "
        "the twins do not differ (a zero direction) has nothing to rescale and is left out.",
    )
    for kind in result.kinds:
        part = summary[summary.kind == kind]
        layers = sorted(part.layer.unique())
        ys, ci = {}, {}
        for control in ("direction", "random"):
            for scale in scales:
                rows = part[(part.control == control) & (part.scale == scale)].set_index("layer").loc[layers]
                ys[f"{control} ×{scale:g} stream"] = rows["flip"].to_numpy()
                ci[f"{control} ×{scale:g} stream"] = (
                    rows["flip_low"].to_numpy(),
                    rows["flip_high"].to_numpy(),
                )
        fig = figures.line_plot(
            layers,
            ys,
            ci=ci,
            title=f"{KINDS[kind]}: fraction flipped by layer, in units of the stream's norm",
            xlabel="layer L (blocks.L.hook_resid_pre)",
            ylabel="fraction flipped",
        )
        _dense_ticks(fig)
        report.add_figure(f"{kind}_flips_stream", fig, caption="Bands: 95% bootstrap intervals over schemas.")
    report.add_table(
        "stream_flips", summary.sort_values(["kind", "control", "scale", "layer"]), max_rows=200,
        caption="Per kind, layer, control and scale (multiples of the stream's norm at that layer)",
    )  # fmt: skip
    compared = result.comparisons
    report.add_table(
        "comparisons",
        compared,
        max_rows=200,
        caption="Direction against its random controls: the shift toward the other pronoun (logits), direction "
        "minus random, paired by item, with its 95% sign-flip interval and p over schemas; Holm over every "
        "comparison of one unit",
    )
    lines = []
    for units, correction in result.corrections.items():
        part = compared[compared.units == units]
        lines.append(f"- In units of {UNITS[units]}: {correction.label}; {_rejected_layers(part)}.")
    report.add_text("\n".join(lines))


def _profile(result) -> dict:
    """Per unit and kind, the corrected comparisons in brief: how many were made and rejected, and the layers
    where the direction beats random at some scale and at every scale (the numbers the README cites)."""
    out: dict = {}
    for units, correction in result.corrections.items():
        part = result.comparisons[result.comparisons.units == units]
        out[units] = {"tests": correction.size, "rejected": int(sum(correction.rejected)), "kinds": {}}
        for kind, rows in part.groupby("kind", sort=False):
            beats = rows.rejected & (rows["diff"] > 0)
            out[units]["kinds"][kind] = {
                "tests": len(rows),
                "beats_random": int(beats.sum()),
                "layers": sorted({int(layer) for layer in rows[beats].layer}),
                "layers_every_scale": sorted(
                    int(layer) for layer, g in rows.groupby("layer") if (g.rejected & (g["diff"] > 0)).all()
                ),
            }
    return out


def _rejected_layers(part: pd.DataFrame) -> str:
    """Per kind, the layers where the direction beats random after correction at every scale, and at some."""
    out = []
    for kind, rows in part.groupby("kind", sort=False):
        above = rows[rows.rejected & (rows["diff"] > 0)]
        every = sorted(
            int(layer) for layer, g in rows.groupby("layer") if (g.rejected & (g["diff"] > 0)).all()
        )
        out.append(
            f"{KINDS[kind]} beats random at layers {', '.join(map(str, sorted(set(above.layer)))) or 'none'} "
            f"(at every scale: {', '.join(map(str, every)) or 'none'})"
        )
    return "; ".join(out)


def _fluency_section(report: Report, result) -> None:
    fluency, scale = result.fluency_summary, result.config.compare_scale
    report.add_section(
        "Fluency cost",
        "KL divergence (nats) from the unsteered next-token distribution after neutral prompts (no person, "
        "so no pronoun due), steering their last token the same way; 95% bootstrap intervals over prompts.",
    )
    for kind in result.kinds:
        part = fluency[fluency.kind == kind]
        layers = sorted(part.layer.unique())
        ys, ci = {}, {}
        for control in ("direction", "random"):
            rows = part[(part.control == control) & (part.scale == scale)].set_index("layer").loc[layers]
            ys[f"{control} ×{scale:g}"] = rows.kl.to_numpy()
            ci[f"{control} ×{scale:g}"] = (rows.kl_low.to_numpy(), rows.kl_high.to_numpy())
        fig = figures.line_plot(
            layers,
            ys,
            ci=ci,
            title=f"{KINDS[kind]}: KL on neutral text",
            ylabel="KL (nats)",
            xlabel="layer L",
        )
        report.add_figure(f"{kind}_kl", fig)
    report.add_table("fluency", fluency.sort_values(["kind", "control", "scale", "layer"]), max_rows=200)


def _continuation_section(report: Report, result) -> None:
    frame = result.continuations
    report.add_section(
        "Continuations",
        "Greedy continuations with the direction added at the last prompt token and every generated token "
        '(`positions=[-1, "new"]`), the first prompts without an antecedent, the others held-out prompts '
        "whose agreeing pronoun is masculine. Perplexity is the unsteered model's, on the generated tokens. "
        "Pronoun counts are whole-word matches in the generated text.",
    )
    if frame.empty:
        report.add_text("No continuations were generated (--continuations 0 and no neutral prompts).")
        return
    frame = frame.copy()
    for name, pattern in WORDS.items():
        frame[name] = [len(pattern.findall(text)) for text in frame.text]
    rows = []
    for condition, part in frame.groupby("condition", sort=False):
        values = part.perplexity.to_numpy()
        ok = ~np.isnan(values)
        low, high = bootstrap_mean(values[ok], np.arange(ok.sum()), 1000, 0)
        rows.append(
            {
                "condition": condition,
                "perplexity": float(np.mean(values[ok])) if ok.any() else math.nan,
                "perplexity_low": low,
                "perplexity_high": high,
                "feminine_pronouns": int(part.feminine.sum()),
                "masculine_pronouns": int(part.masculine.sum()),
            }
        )
    report.add_table("continuation_summary", pd.DataFrame(rows), caption="95% bootstrap over prompts.")
    report.add_table("continuations", frame[["condition", "prompt", "text", "perplexity"]], max_rows=60)


def _norms_section(report: Report, result) -> None:
    rows = []
    for layer in result.layers:
        row = {"layer": layer}
        for kind in result.kinds:
            row[f"norm {KINDS[kind]}"] = result.directions[kind][layer].norm
            row[f"stream norm ({kind} twins)"] = result.norms[kind][layer]
            row[f"ratio {KINDS[kind]}"] = result.directions[kind][layer].norm / result.norms[kind][layer]
        if len(result.kinds) == 2:
            a, b = (result.directions[k][layer].vector.float() for k in result.kinds)
            denom = float(a.norm() * b.norm())
            row["cosine"] = float(a @ b) / denom if denom else math.nan
        rows.append(row)
    report.add_section(
        "Directions",
        "The norm of each direction (the mean twin difference at the last token) grows with depth, and so does "
        "its ratio to the stream's mean norm there: scale 1 means a different push at every layer, the same "
        "relative to what separates the twins, not to what is already in the stream.",
    )
    report.add_table("directions", pd.DataFrame(rows))
