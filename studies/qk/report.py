"""The qk study's report: hypothesis, per-head splits and interventions, and a plain verdict."""

from __future__ import annotations

import pandas as pd

from interp.report import Report
from studies.qk.measure import KEY_GROUPS, QUERY_GROUPS

SWITCH_SHARE = 0.25
"""The share of a head's preference that heads reading the switch word must carry for the seed's story."""


def _interval(ci) -> str:
    if ci[0] != ci[0]:  # NaN: fewer than two schemas
        return "(no interval: one schema)"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _count(head: dict) -> str:
    """ "right in both twins on k of n test pairs (f [lo, hi]; chance 0.25): above chance / not above chance"."""
    r = head["right_in_both"]
    above = r["p"] < 0.05 and r["ci"][0] > r["chance"]
    return (
        f"right in both twins on {r['k']} of {r['n']} test pairs ({r['fraction']:.2f} {_interval(r['ci'])}; "
        f"chance with random signs {r['chance']:.2f}, one-sided exact p = {r['p']:.2g}): "
        + ("above chance on held-out pairs" if above else "**not** above chance on held-out pairs")
    )


def _sensitivity(head: dict) -> str:
    """The primary sentences: the head's switch sensitivity and bias on the held-out pairs (its verdict), the
    Holm-adjusted p over the analysed heads, and the seed's pair apart."""
    switch, name = head["switch"], head["head"]
    if switch is None:
        return f"{name}: no held-out pairs to test."
    sens = switch.sensitivity
    shown = sens.interval.low > 0 and head["p_holm"] <= 0.05
    text = switch.verdict(name) + (
        f" Holm over the analysed heads: p = {head['p_holm']:.2g}, so "
        + (
            "its sensitivity stands after correction."
            if shown
            else "no sensitivity is shown after correction."
        )
    )
    seed = head.get("seed_switch")
    if seed is not None:
        text += (
            f" The seed's pair, counted apart: twin difference {seed.sensitivity.estimate:+.2f}, bias "
            f"{seed.bias.estimate:+.2f} score units."
        )
    return text


def _verdict(head: dict) -> str:
    """One plain paragraph: the head's switch sensitivity and bias on held-out pairs, how often it is right in
    both twins against chance, what carries its preference where it is right, and the intervention's
    consistency check (not evidence: see the report's method section)."""
    s = head["summary"]
    name = head["head"]
    seed = f"the seed's pair, counted apart: {'right in both' if head['seed_flips'] else 'not right in both'}"
    lead = _sensitivity(head) + " "
    if not s:
        return f"{lead}{name}: {_count(head)}; {seed}. There are no twins to split."
    switch = s["query_shares"]["switch word"]
    top, rnd = s["top"], s["random"]
    shares = s.get("query_shares_ci", {})
    text = lead + (
        f"{name}: {_count(head)}; {seed}. On the {s['n_twins']} twins where it is right, mean preference "
        f"{s['clean_preference']:.2f}; heads reading the switch word carry {switch:.2f} "
        f"{_interval(shares.get('switch word', (float('nan'),) * 2))} of it into the query, MLPs at the query "
        f"{s['query_shares']['MLPs at the query']:.2f} "
        f"{_interval(shares.get('MLPs at the query', (float('nan'),) * 2))} (intervals over schemas). "
    )
    if not rnd.get("n"):
        return text + "The query is its token's embedding alone: no random components to compare with."
    text += (
        f"Consistency check, not evidence (the removed parts were chosen by their own terms, so removing them "
        f"lowers the preference to first order): removing the top query components changes it by "
        f"{top['change']:.2f} {_interval(top['change_ci'])} (flipped {top['flipped']:.2f} "
        f"{_interval(top['flipped_ci'])}), matched random components by {rnd['change']:.2f} "
        f"{_interval(rnd['change_ci'])}. "
    )
    story = switch >= SWITCH_SHARE
    text += (
        "The switch word carries a large share of the preference, as the seed's story needs"
        if story
        else "The switch word is not what carries the preference: not the seed's mechanism"
    )
    r = head["right_in_both"]
    if not (r["p"] < 0.05 and r["ci"][0] > r["chance"]):
        text += "; and since the head is not above chance on held-out pairs, this describes those twins only"
    return text + "."


def write_report(report: Report, config, results: dict, seconds: float) -> None:
    report.add_section("Hypothesis and metric")
    report.add_text(
        "A head resolving the pronoun as the seed describes would prefer the referent over the foil from the "
        "sentence's last token in both twins, with its query carrying the switch word (earlier heads' writes "
        "read from the adjective's position) and matching the referent's key; removing the top query-side "
        "components from the head's query input should flip or shrink the preference, and components of "
        "matched norm chosen at random should not. The primary measure is each head's switch sensitivity: per "
        "pair, its preference for the first candidate in one twin minus that in the other, signed toward the "
        "expected referent (score units; 0 is none), tested by sign flips over the held-out pairs, Holm-corrected "
        "over the analysed heads, with its bias (the mean preference over both twins) apart. "
        "The preference is split exactly into query x key "
        "component terms (QK attribution). A head is right on a pair when it prefers each twin's own referent "
        "(which needs half its sensitivity to exceed its bias): "
        "with random signs, 25% of pairs (the chance level next to every count). Heads are chosen on half the "
        "schemas and counted on the other half; the seed's pair is in neither half and is reported apart. "
        "Intervals are 95% bootstraps over schemas, a pair's twins and their random draws resampled together. "
        "Removing the top query components is a consistency check, not evidence: they are chosen as the "
        "largest terms of the very preference they are then removed from, so it falls to first order; the "
        "random components are drawn from the remaining terms, which sum to the preference minus the top ones, "
        "so they are not a baseline drawn the same way."
    )
    report.add_section("Data")
    report.add_text(
        f"{results['n_pairs']} twin pairs of `{config.data}` plus the seed's own pair; heads selected on "
        f"{len(results['select'])} pairs (half the schemas) and analysed on the {len(results['test'])} others; "
        f"the seed's pair is counted apart. Fixed heads: {', '.join(config.heads) or 'none'}; selected: "
        f"{config.top_heads}. Top components removed: {config.top}; random draws: {config.random_draws}."
    )
    report.add_section("Which heads flip with the switch word")
    report.add_text(
        "The heads of every layer with the largest mean switch sensitivity on the test pairs (score units; 0 is "
        "none), with how many test pairs they are right in both twins (chance with random signs 0.25) and their "
        "mean sensitivity on the selection pairs. They are ranked on the test pairs themselves, so the first is "
        "the best of all heads there, not a held-out estimate:"
    )
    report.add_table(
        "overview",
        pd.DataFrame(results["overview"]),
        caption="Top heads, all layers, ranked on the test pairs",
    )
    out = {"heads": {}, "overview": results["overview"], "n_pairs": results["n_pairs"]}
    out.update(n_select=len(results["select"]), n_test=len(results["test"]))
    rows = []
    for head in results["heads"]:
        report.add_section(head["head"])
        report.add_text(_verdict(head))
        s = head["summary"]
        if s:
            report.add_headline(
                f"{head['head']}: change of the preference when the top query components are removed",
                round(s["top"]["change"], 3),
                ci=tuple(round(x, 3) for x in s["top"]["change_ci"]),
            )
            for side, groups in (("query", QUERY_GROUPS), ("key", KEY_GROUPS)):
                report.add_table(
                    f"{head['head']}_{side}_shares",
                    _shares(s, side, groups),
                    caption=f"{side.capitalize()} side: pooled share of the preference (95% over schemas)",
                )
            per = pd.DataFrame(
                {
                    "pair": [r["pair"] for r in head["records"]],
                    "text": [r["text"] for r in head["records"]],
                    "preference": [r["preference"] for r in head["records"]],
                    "via the switch word": [r["query_terms"]["switch word"] for r in head["records"]],
                    "top query components": ["; ".join(t for t, _ in r["top"][:3]) for r in head["records"]],
                    "top removed": [r["after_top"] for r in head["records"]],
                    "random removed": [_mean(r["after_random"]) for r in head["records"]],
                    "strongest pair": [
                        f"{r['best_pair']['query']} x {r['best_pair']['key']}" for r in head["records"]
                    ],
                }
            )
            report.add_table(
                f"{head['head']}_per_twin",
                per,
                caption=(
                    "Per twin, in score units: the preference, its part via heads reading the switch word, and "
                    "the preference with the top or random query components removed"
                ),
            )
        r = head["right_in_both"]
        sw = head["switch"]
        rows.append(
            {
                "head": head["head"],
                **(
                    {}
                    if sw is None
                    else {
                        "sensitivity": sw.sensitivity.estimate,
                        "sens_low": sw.sensitivity.interval.low,
                        "sens_high": sw.sensitivity.interval.high,
                        "sens_p": sw.sensitivity.p_value,
                        "sens_p_holm": head["p_holm"],
                        "bias": sw.bias.estimate,
                    }
                ),
                "right in both": r["k"],
                "of": r["n"],
                "chance": r["chance"],
                "p": r["p"],
                **_flat(s),
            }
        )
        out["heads"][head["head"]] = {
            "switch": None if sw is None else sw.to_json(),
            "p_holm": head["p_holm"],
            "seed_switch": None if head["seed_switch"] is None else head["seed_switch"].to_json(),
            "n_test_pairs": head["n_test_pairs"],
            "n_flipping_pairs": head["n_flipping_pairs"],
            "right_in_both": head["right_in_both"],
            "seed_flips": head["seed_flips"],
            "seed_preferences": head["seed_preferences"],
            "summary": s,
            "verdict": _verdict(head),
        }
    report.add_section("Over the set")
    report.add_table(
        "heads",
        pd.DataFrame(rows),
        caption="Per head: the switch sensitivity on the test pairs (95% sign-flip interval, p and Holm p), the "
        "bias, right in both twins, and the splits pooled over the twins where it is right",
    )
    correction = results["correction"]
    report.add_text(correction.label + ".")
    out["correction"] = correction.to_json()
    report.add_section("Run")
    report.add_text(f"Wall time {seconds:.0f} s; the manifest records it too.")
    report.add_results(out)


def _shares(s: dict, side: str, groups: tuple[str, ...]) -> pd.DataFrame:
    ci = s.get(f"{side}_shares_ci", {})
    nan = (float("nan"), float("nan"))
    return pd.DataFrame(
        {
            "group": list(groups),
            "share": [s[f"{side}_shares"][g] for g in groups],
            "ci_low": [ci.get(g, nan)[0] for g in groups],
            "ci_high": [ci.get(g, nan)[1] for g in groups],
        }
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _flat(s: dict) -> dict:
    if not s:
        return {}
    row = {"twins": s["n_twins"], "preference": s["clean_preference"]}
    row["via the switch word"] = s["query_shares"]["switch word"]
    for name in ("top", "random"):
        if s[name].get("n"):
            row[f"change ({name})"] = s[name]["change"]
            row[f"flipped ({name})"] = s[name]["flipped"]
    return row
