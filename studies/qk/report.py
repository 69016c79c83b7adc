"""The qk study's report: hypothesis, per-head splits and interventions, and a plain verdict."""

from __future__ import annotations

import pandas as pd

from interp.report import Report
from studies.qk.measure import KEY_GROUPS, QUERY_GROUPS


def _verdict(head: dict) -> str:
    s = head["summary"]
    if not s:
        return (
            f"{head['head']}: its preference has the right sign in both twins on none of the "
            f"{head['n_test_pairs']} test pairs; here the head does not resolve the pronoun at all."
        )
    switch = s["query_shares"]["switch word"]
    top, rnd = s["top"], s["random"]
    causal = top["remaining_ci"][1] < rnd["remaining_ci"][0] if top["n"] > 1 else False
    carried = "carries" if switch > 0.25 else "does not carry"
    return (
        f"{head['head']}: right in both twins on {head['n_flipping_pairs']} of {head['n_test_pairs']} test pairs "
        f"(seed pair: {'yes' if head['seed_flips'] else 'no'}). The switch word's position {carried} a large "
        f"share of the preference into the query ({switch:.2f} of it through heads reading the switch word; "
        f"MLPs at the query {s['query_shares']['MLPs at the query']:.2f}). Removing the top query components "
        f"leaves {top['remaining']:.2f} of the preference [{top['remaining_ci'][0]:.2f}, "
        f"{top['remaining_ci'][1]:.2f}] and flips {top['flipped']:.2f}; matched random components leave "
        f"{rnd['remaining']:.2f} [{rnd['remaining_ci'][0]:.2f}, {rnd['remaining_ci'][1]:.2f}]. "
        + (
            "The seed's story holds for this head: the switch word reaches the query and the top components are "
            "causal beyond random ones."
            if causal and switch > 0.25
            else "The top components matter more than random ones, but the switch word is not what carries the "
            "preference: a different mechanism."
            if causal
            else "The intervention does not separate the top components from random ones."
        )
    )


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
    out = {"heads": {}}
    rows = []
    for head in results["heads"]:
        report.add_section(head["head"])
        report.add_text(_verdict(head))
        s = head["summary"]
        if s:
            report.add_headline(
                f"{head['head']} preference left after removing the top components",
                round(s["top"]["remaining"], 3),
                ci=tuple(round(x, 3) for x in s["top"]["remaining_ci"]),
            )
            shares = pd.DataFrame(
                {"group": list(QUERY_GROUPS), "mean share": [s["query_shares"][g] for g in QUERY_GROUPS]}
            )
            report.add_table(
                f"{head['head']}_query_shares", shares, caption="Query side: share of the preference"
            )
            keys = pd.DataFrame(
                {"group": list(KEY_GROUPS), "mean share": [s["key_shares"][g] for g in KEY_GROUPS]}
            )
            report.add_table(f"{head['head']}_key_shares", keys, caption="Key side: share of the preference")
            per = pd.DataFrame(
                {
                    "pair": [r["pair"] for r in head["records"]],
                    "text": [r["text"] for r in head["records"]],
                    "preference": [r["preference"] for r in head["records"]],
                    "switch share": [r["query_shares"]["switch word"] for r in head["records"]],
                    "top query components": ["; ".join(t for t, _ in r["top"][:3]) for r in head["records"]],
                    "left (top removed)": [r["remaining_top"] for r in head["records"]],
                    "left (random)": [
                        sum(r["remaining_random"]) / len(r["remaining_random"]) for r in head["records"]
                    ],
                }
            )
            report.add_table(f"{head['head']}_per_twin", per, caption="Per twin")
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


def _flat(s: dict) -> dict:
    if not s:
        return {}
    return {
        "twins": s["n_twins"],
        "switch share": s["query_shares"]["switch word"],
        "left (top)": s["top"]["remaining"],
        "left (random)": s["random"]["remaining"],
        "flipped (top)": s["top"]["flipped"],
        "flipped (random)": s["random"]["flipped"],
    }
