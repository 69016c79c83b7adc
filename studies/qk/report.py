"""The qk study's report: hypothesis, per-head splits and interventions, and a plain verdict."""

from __future__ import annotations

import pandas as pd

from interp.report import Report
from studies.qk.measure import KEY_GROUPS, QUERY_GROUPS

SWITCH_SHARE = 0.25
"""The share of a head's preference that heads reading the switch word must carry for the seed's story."""


FEW = 0.2
"""Below this fraction of test pairs right in both twins, a head's mechanism is reported for those twins only."""


def _interval(ci) -> str:
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _verdict(head: dict) -> str:
    """One plain paragraph: does the seed's story hold for this head, does another mechanism, or neither."""
    s = head["summary"]
    name = head["head"]
    if not s:
        return (
            f"{name}: its preference has the right sign in both twins on none of the {head['n_test_pairs']} "
            "test pairs; from the sentence's last token this head does not resolve the pronoun at all."
        )
    switch = s["query_shares"]["switch word"]
    top, rnd = s["top"], s["random"]
    text = (
        f"{name}: right in both twins on {head['n_flipping_pairs']} of {head['n_test_pairs']} test pairs "
        f"(the seed's pair: {'yes' if head['seed_flips'] else 'no'}); mean preference "
        f"{s['clean_preference']:.2f}. Heads reading the switch word carry {switch:.2f} of it into the query, "
        f"MLPs at the query {s['query_shares']['MLPs at the query']:.2f}. "
    )
    if not rnd.get("n"):
        return text + "The query is its token's embedding alone: no random components to compare with."
    text += (
        f"Removing the top query components changes it by {top['change']:.2f} {_interval(top['change_ci'])} "
        f"(left {top['left']:.2f}, flipped {top['flipped']:.2f} {_interval(top['flipped_ci'])}); matched "
        f"random components by {rnd['change']:.2f} {_interval(rnd['change_ci'])} (flipped {rnd['flipped']:.2f}). "
    )
    causal = top["n"] > 1 and top["change_ci"][1] < rnd["change_ci"][0]
    few = head["n_flipping_pairs"] < FEW * head["n_test_pairs"]
    where = "On these few twins only" if few else "Over these twins"
    if causal and switch >= SWITCH_SHARE:
        text += f"{where} the seed's story holds: the switch word reaches the query and those components cause it."
    elif causal:
        text += (
            f"{where} the top components cause the preference beyond random ones, but the switch word is not "
            "what they carry: a different mechanism."
        )
    elif top["n"] < 4:
        text += "Too few twins to tell the top components from random ones."
    else:
        text += "The intervention does not tell the top components from random ones."
    if few:
        text += " Over the set, this head does not resolve the pronoun from the last token."
    return text


def write_report(report: Report, config, results: dict, seconds: float) -> None:
    report.add_section("Hypothesis and metric")
    report.add_text(
        "A head resolving the pronoun as the seed describes would prefer the referent over the foil from the "
        "sentence's last token in both twins, with its query carrying the switch word (earlier heads' writes "
        "read from the adjective's position) and matching the referent's key; removing the top query-side "
        "components from the head's query input should flip or shrink the preference, and components of "
        "matched norm chosen at random should not. The preference is split exactly into query x key "
        "component terms (QK attribution); intervals are 95% (bootstrap for means, Wilson for fractions)."
    )
    report.add_section("Data")
    report.add_text(
        f"{results['n_pairs']} twin pairs of `{config.data}` plus the seed's own pair; heads selected on "
        f"{len(results['select'])} pairs (half the schemas) and analysed on the {len(results['test'])} others "
        f"(the seed's pair included). Fixed heads: {', '.join(config.heads) or 'none'}; selected: "
        f"{config.top_heads}. Top components removed: {config.top}; random draws: {config.random_draws}."
    )
    report.add_section("Which heads flip with the switch word")
    report.add_text(
        "A head resolves a pair from the sentence's last token when it prefers each twin's own referent. The "
        "heads that do so on the most test pairs, with their count on the selection pairs and how well they "
        "tracked the switch word there (mean of the smaller twin preference, score units):"
    )
    report.add_table("overview", pd.DataFrame(results["overview"]), caption="Top heads, all layers")
    out = {"heads": {}, "overview": results["overview"]}
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
            shares = pd.DataFrame(
                {"group": list(QUERY_GROUPS), "mean share": [s["query_shares"][g] for g in QUERY_GROUPS]}
            )
            report.add_table(
                f"{head['head']}_query_shares", shares, caption="Query side: pooled share of the preference"
            )
            keys = pd.DataFrame(
                {"group": list(KEY_GROUPS), "mean share": [s["key_shares"][g] for g in KEY_GROUPS]}
            )
            report.add_table(
                f"{head['head']}_key_shares", keys, caption="Key side: pooled share of the preference"
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
        rows.append({"head": head["head"], "flipping pairs": head["n_flipping_pairs"], **_flat(s)})
        out["heads"][head["head"]] = {
            "n_test_pairs": head["n_test_pairs"],
            "n_flipping_pairs": head["n_flipping_pairs"],
            "seed_flips": head["seed_flips"],
            "summary": s,
            "verdict": _verdict(head),
        }
    report.add_section("Over the set")
    report.add_table("heads", pd.DataFrame(rows), caption="Per head, pooled over the test twins")
    report.add_section("Run")
    report.add_text(f"Wall time {seconds:.0f} s; the manifest records it too.")
    report.add_results(out)


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
