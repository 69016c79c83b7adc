"""The steering study's conclusions, in sentences built from the measured numbers.

Two sections of the report: where steering starts to work against the layers of the patched heads, and what is
and is not found. Nothing here states a number that is not in the tables.
"""

from __future__ import annotations

import math

import pandas as pd

from interp.report import Report
from studies.steering.measure import KINDS


def summary_row(summary: pd.DataFrame, kind: str, layer: int, control: str, scale: float) -> pd.Series:
    rows = summary[
        (summary.kind == kind)
        & (summary.layer == layer)
        & (summary.control == control)
        & (summary.scale == scale)
    ]
    return rows.iloc[0]


def pct(row: pd.Series, key: str = "flip") -> str:
    value, low, high = row[key], row[f"{key}_low"], row[f"{key}_high"]
    if math.isnan(value):
        return "n/a"
    return f"{100 * value:.0f}% [{100 * low:.0f}, {100 * high:.0f}]"


def focus_section(report: Report, result) -> None:
    kind = result.kinds[0]
    summary, scale, label = result.flip_summary, result.config.compare_scale, KINDS[kind]
    report.add_section("Where patching found the signal")
    if not result.focus:
        report.add_text("No focus layers were given (--focus), so this question is not asked here.")
        return
    lines = []
    for layer in sorted({x for f in result.focus for x in (f, f + 1)}):
        if layer in result.layers:
            row = summary_row(summary, kind, layer, "direction", scale)
            rand = summary_row(summary, kind, layer, "random", scale)
            lines.append(f"- entering block {layer}: {pct(row)} flipped (random: {pct(rand)})")
    best = result.best[kind]
    best_row = summary_row(summary, kind, best, "direction", scale)
    text = (
        f"At ×{scale:g}, the {label} direction flips, of the held-out items the model gets right:\n\n"
        + "\n".join(lines)
        + f"\n\nThe best layer is {best} ({pct(best_row)})."
    )
    onset = _onset(summary, kind, scale)
    if onset is None:
        text += (
            f" At no layer does the direction flip more items than random at ×{scale:g} (intervals apart)."
        )
    else:
        earlier = summary[
            (summary.kind == kind) & (summary.control == "direction") & (summary.scale == scale)
            & (summary.layer < onset)
        ]  # fmt: skip
        if len(earlier):
            top = earlier.sort_values("flip").iloc[-1]
            text += (
                f" The first layer where it flips more items than random (intervals apart) is {onset}; before "
                f"it, no layer flips more than {100 * top.flip:.0f}% (layer {int(top.layer)})."
            )
        heads = sorted({f + 1 for f in result.focus})
        if onset in heads:
            text += (
                f" So steering at the last token starts to work in the stream right after a patched head "
                f"writes (entering block {onset}), and not before."
            )
        elif onset < min(heads):
            text += " So steering works before the patched heads write too."
        else:
            text += " So steering starts to work only after the patched heads have written."
    later = summary[
        (summary.kind == kind) & (summary.control == "direction") & (summary.scale == scale)
        & (summary.layer > max(result.focus) + 1)
    ]  # fmt: skip
    after = [
        r
        for f in result.focus
        if f + 1 in result.layers
        for r in [summary_row(summary, kind, f + 1, "direction", scale)]
    ]
    if after and len(later):
        strongest = max(after, key=lambda r: r.flip)
        if strongest.flip_high >= best_row.flip_low:
            text += (
                f" Entering block {int(strongest.layer)} ({pct(strongest)}) is within the interval of the best "
                "layer: these data do not show a later layer steering better."
            )
        else:
            text += (
                f" Later layers steer better still: entering block {int(strongest.layer)} flips "
                f"{pct(strongest)}, the best layer {pct(best_row)}."
            )
    report.add_text(text)


def _onset(summary: pd.DataFrame, kind: str, scale: float) -> int | None:
    """The first layer whose direction flips more items than its random control (intervals apart)."""
    part = summary[(summary.kind == kind) & (summary.scale == scale)]
    direction = part[part.control == "direction"].set_index("layer")
    random = part[part.control == "random"].set_index("layer")
    above = [int(l) for l in direction.index if direction.flip_low[l] > random.flip_high[l]]
    return min(above) if above else None


def findings_section(report: Report, result) -> None:
    summary, scale = result.flip_summary, result.config.compare_scale
    found, not_found = [], []
    for kind in result.kinds:
        label = KINDS[kind]
        part = summary[(summary.kind == kind) & (summary.scale == scale)]
        direction = part[part.control == "direction"].set_index("layer")
        random = part[part.control == "random"].set_index("layer")
        above = [int(l) for l in direction.index if direction.flip_low[l] > random.flip_high[l]]
        best = result.best[kind]
        if above:
            found.append(
                f"The {label} direction flips more held-out items than a random direction of equal norm at "
                f"×{scale:g} at layers {', '.join(map(str, above))} (intervals apart); at layer {best} "
                f"{pct(direction.loc[best])} against {pct(random.loc[best])}."
            )
            below = [int(l) for l in direction.index if int(l) < min(above)]
            if below:
                not_found.append(
                    f"Before layer {min(above)}, adding the {label} direction at the last token is not shown to "
                    f"flip more items than a random direction (×{scale:g}; the intervals overlap)."
                )
        else:
            not_found.append(
                f"At no layer does the {label} direction flip more items than random at ×{scale:g} (intervals "
                "apart)."
            )
        n = result.counts[kind]["test_pairs"]
        if n < 20:
            not_found.append(
                f"The {label} comparison rests on {n} held-out twin pairs; its intervals are wide and a small "
                "effect would go unseen."
            )
    found += _corrected_findings(result)
    found += _fluency_findings(result)
    not_found.append(
        "Steering acts at one position per step; whether adding the direction at every position (or at the "
        "antecedent) works better is not measured here."
    )
    report.add_section("What is and is not found")
    report.add_text("\n".join(f"- {s}" for s in found) or "- No direction beats its random control.")
    report.add_text("\n".join(f"- {s}" for s in not_found))


def _corrected_findings(result) -> list[str]:
    """Per unit, where the direction shifts the prediction more than its random controls after Holm's
    correction over every comparison of that unit (kind, layer and scale)."""
    out = []
    compared = result.comparisons
    if compared is None or not len(compared):
        return out
    for units, correction in result.corrections.items():
        part = compared[(compared.units == units) & compared.rejected & (compared["diff"] > 0)]
        words = "its own norm" if units == "direction" else "the stream's norm at that layer"
        for kind in result.kinds:
            layers = sorted(set(part[part.kind == kind].layer.astype(int)))
            out.append(
                f"In units of {words}, the {KINDS[kind]} direction shifts the prediction toward the other pronoun "
                f"more than random, after Holm's correction over the {correction.size} comparisons of that unit, "
                + (f"at layers {', '.join(map(str, layers))}." if layers else "at no layer.")
            )
    return out


def _fluency_findings(result) -> list[str]:
    kind, scale = result.kinds[0], result.config.compare_scale
    best, label = result.best[kind], KINDS[kind]
    fluency = result.fluency_summary
    rows = fluency[(fluency.kind == kind) & (fluency.layer == best) & (fluency.scale == scale)]
    rows = rows.set_index("control")
    d, r = rows.loc["direction"], rows.loc["random"]
    out = [
        f"On neutral text, steering with the {label} direction at layer {best} (×{scale:g}) moves the next-token "
        f"distribution by {d.kl:.3f} nats [{d.kl_low:.3f}, {d.kl_high:.3f}] (KL), a random direction of equal "
        f"norm by {r.kl:.3f} [{r.kl_low:.3f}, {r.kl_high:.3f}]."
    ]
    frame = result.continuations
    if not frame.empty:
        means = frame.groupby("condition", sort=False).perplexity.mean()
        parts = [f"{name}: {value:.2f}" for name, value in means.items()]
        out.append(
            "Mean perplexity of the greedy continuations under the unsteered model, by condition: "
            + "; ".join(parts)
            + " (intervals in the continuations table)."
        )
    return out
