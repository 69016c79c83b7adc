"""The seed's question answered: the summaries of :mod:`studies.attribution.seed` over prompts (intervals over
twin pairs, counts against their chance levels), the sentences that state the answer, and the report's tables.

A sentence says "moves the answer more than random nodes matched on activation and on influence" only when the
intervals of both paired differences (named minus matched, signed toward the expected answer) exclude zero; a
group of one twin pair (the seed's) has numbers and no intervals; the first sentence says whether the model does
what the seed describes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interp.analysis.stats import sign_flip_test
from studies.attribution.measure import interval

TESTS = ("query", "key", "query_heldout", "key_heldout", "query_across")
CONTROLS = ("activation", "influence")  # what the random nodes of each baseline are matched on


def resolution(rows: list[dict]) -> dict:
    """Twin pairs whose preference has the expected sign in both twins, against the 25% of random signs; and
    prompts right, against 50%."""
    by_schema: dict[str, list[float]] = {}
    for r in rows:
        by_schema.setdefault(r["schema"], []).append(r["sign"] * r["clean"])
    pairs = [v for v in by_schema.values() if len(v) == 2]
    right = [float(x > 0) for r in rows for x in [r["sign"] * r["clean"]]]
    return {
        "pairs": len(pairs),
        "resolved": sum(all(x > 0 for x in v) for v in pairs),
        "chance": 0.25,
        "prompts": len(rows),
        "right": int(sum(right)),
        "prompt_chance": 0.5,
        "p_value": sign_flip_test(right, 0.5, groups=[r["schema"] for r in rows]) if rows else float("nan"),
    }


def summarise(rows: list[dict], draws: int, seed: int) -> dict:
    """Per test: the named nodes' signed effects on the answer and on the attention and, per baseline (matched
    on activation, on influence), the matched sets' and the paired difference, each with an interval over twin
    pairs, and how often the named set beats every matched set (signed: lowers the answer's preference more),
    against ``1 / (draws + 1)``."""
    out: dict[str, Any] = {"resolution": resolution(rows)}
    for test in TESTS:
        kept = [r for r in rows if test in r["tests"] and r["tests"][test].get("controls")]
        groups = [r["schema"] for r in kept]
        t = [r["tests"][test] for r in kept]
        if not kept:
            out[test] = {"n": 0}
            continue
        found: dict[str, Any] = {
            "n": len(kept),
            "pairs": len(set(groups)),
            "shared": sum(x.get("shared", 0) for x in t),
            "logit": interval([x["logit"] for x in t], seed, groups),
            "attention": interval([x["attention"] for x in t], seed, groups),
        }
        for control in CONTROLS:
            c = [x["controls"][control] for x in t]
            rl = [float(np.mean(x["logit"])) for x in c]
            ra = [float(np.mean(x["attention"])) for x in c]
            wins = [float(x["logit"] < min(y["logit"])) for x, y in zip(t, c, strict=True)]
            found[f"{control}_logit"] = interval(rl, seed, groups)
            found[f"logit_vs_{control}"] = interval(
                [x["logit"] - r for x, r in zip(t, rl, strict=True)], seed, groups
            )
            found[f"{control}_attention"] = interval(ra, seed, groups)
            found[f"attention_vs_{control}"] = interval(
                [x["attention"] - r for x, r in zip(t, ra, strict=True)], seed, groups
            )
            found[f"beats_every_{control}"] = {
                **interval(wins, seed, groups),
                "count": int(sum(wins)),
                "n": len(wins),
                "chance": 1 / (draws + 1),
            }
        out[test] = found
    return out


def _ci(x: dict) -> str:
    lo, hi = x["ci"]
    where = f" [{lo:+.3g}, {hi:+.3g}]" if np.isfinite(lo) else ""
    return f"{x['mean']:+.3g}{where}"


def _count(b: dict, unit: str = "") -> str:
    """``"3 of 6 prompts (0.50 [0.17, 0.83]; chance 0.25)"``: the count, its fraction with the interval over
    twin pairs (none for one pair), and the chance level."""
    lo, hi = b.get("ci", (float("nan"), float("nan")))
    fraction = f"{b['mean']:.2f} [{lo:.2f}, {hi:.2f}]; " if np.isfinite(lo) else ""
    return f"{b['count']} of {b['n']}{unit} ({fraction}chance {b['chance']:.2f})"


def _excludes_zero(x: dict) -> bool:
    lo, hi = x["ci"]
    return bool(np.isfinite(lo) and (hi < 0 or lo > 0))


def _test_sentence(t: dict, what: str) -> str:
    if not t.get("n"):
        return f"{what}: not measured (no prompt had named feature nodes to remove)."
    a, i = t["logit_vs_activation"], t["logit_vs_influence"]
    if not np.isfinite(a["ci"][0]):
        lead = ""
    elif _excludes_zero(a) and _excludes_zero(i) and a["mean"] < 0 and i["mean"] < 0:
        lead = " moves the answer more than random nodes matched on activation and on influence do"
    elif _excludes_zero(a) and a["mean"] < 0:
        lead = (
            " moves the answer more than random nodes matched on activation, not more than those matched on "
            "influence"
        )
    else:
        lead = " does not move the answer more than matched random nodes do"
    shared = f"; {t['shared']} named nodes left out at positions both twins share" if t.get("shared") else ""
    return (
        f"{what}{lead}: answer {_ci(t['logit'])} logits toward the expected answer against "
        f"{_ci(t['activation_logit'])} for random nodes matched on activation (difference {_ci(a)}) and "
        f"{_ci(t['influence_logit'])} for those matched on influence (difference {_ci(i)}); the head's attention "
        f"to the referent {_ci(t['attention'])} against {_ci(t['activation_attention'])} and "
        f"{_ci(t['influence_attention'])}; the named set lowers the answer more than every matched set in "
        f"{_count(t['beats_every_activation'], ' prompts')} (activation) and "
        f"{_count(t['beats_every_influence'], ' prompts')} (influence){shared}; "
        f"{t['n']} prompt{'s' if t['n'] != 1 else ''}, "
        + (f"{t['pairs']} twin pairs." if t["pairs"] > 1 else "one twin pair: numbers, no intervals.")
    )


WHAT = {
    "query": "Within each prompt (a consistency check: the nodes were chosen on it), removing the top head's named "
    "query nodes",
    "key": "Within each prompt (a consistency check), removing its named key nodes",
    "query_heldout": "Held out (the nodes named on the twin, its head), removing the query nodes",
    "key_heldout": "Held out, removing the key nodes",
    "query_across": "Held out across pairs (the query nodes at the last position named most often on the other "
    "twin pairs, their most frequent top head), removing them",
}


def verdict(groups: dict) -> list[tuple[str, str]]:
    """The answer in sentences, ``(group, sentence)``, first the one that says whether the model does this."""
    out: list[tuple[str, str]] = []
    wg = groups.get("winograd")
    if wg is not None:
        rows, r = wg["rows"], wg["summary"]["resolution"]
        values = ", ".join(f"{x['clean']:+.2f} ({x['prompt']})" for x in rows)
        if r["pairs"] and r["resolved"] == r["pairs"]:
            head = "The model resolves 'it' by the switch word in the seed's pair"
        else:
            head = "**The model does not do this.** It does not resolve 'it' by the switch word in the seed's pair"
        seen = [
            f"{x['head']} attends {x['attention_clean']:.3f} to the referent and "
            f"{x.get('attention_other_clean', float('nan')):.3f} to the other noun ({x['prompt']})"
            for x in rows
            if "head" in x
        ]
        out.append(
            (
                "winograd",
                f"{head}: animal - street is {values} (expected: positive for 'tired', negative for 'wide'); "
                f"{r['resolved']} of {r['pairs']} twin pair resolves (chance 25%). The top head of the edge from "
                "the referent into the answer: "
                + "; ".join(seen)
                + ". One twin pair: numbers, no intervals.",
            )
        )
        out += [
            ("winograd", _test_sentence(wg["summary"][t], w)) for t, w in WHAT.items() if t != "query_across"
        ]
    ag = groups.get("agreement")
    if ag is not None:
        s, r = ag["summary"], ag["summary"]["resolution"]
        out.append(
            (
                "agreement",
                f"Agreement: {r['resolved']} of {r['pairs']} twin pairs resolve (the preference has the expected "
                f"sign in both twins; chance 25%), {r['right']} of {r['prompts']} prompts right (chance 50%, "
                f"p = {r['p_value']:.2g} by flipping whole twin pairs).",
            )
        )
        out += [("agreement", _test_sentence(s[t], w)) for t, w in WHAT.items()]
    return out


SEED_METHOD = (
    "For each prompt, the edge from the referent (the word the expected answer names: the animal for 'tired', "
    "the street for 'wide', the name in agreement) into the answer: the feature or token node at the referent "
    "with the largest absolute direct edge to the target. Its {top_heads} heads with the largest loadings, and for "
    "each the head's score from the last position to the referent split into query-node x key-node terms of the "
    "graph's own nodes (summing to the score), and, in the seed's pair, the difference against the other noun's "
    "key. The test: zero the top head's {named} feature nodes whose parts raise its score most (query side: "
    "q_n . k; key side: q . k_m) in a free run of the replacement model, and read the head's attention to the "
    "referent and the answer (signed toward the expected answer: negative when the removal takes from it), "
    "against two baselines of {draws} sets of random active features at the same positions each: every node "
    "drawn among the {pool} nearest to its named node in activation, and among the {pool} nearest in influence "
    "on the target in the prompt's graph (seed {seed}). Within a prompt this is a consistency check (the nodes "
    "were chosen there); held out, the nodes named on one twin are removed from the other, moved by role, "
    "except nodes at positions both twins share outside the candidates' words (the same node in both twins, so "
    "no test of what differs between them; they are counted). Intervals: 95% over twin pairs (the t-interval "
    "below 10 pairs); the seed's pair is one pair, so it has numbers and no interval. A twin pair resolves when "
    "the preference has the expected sign in both twins (chance 25%)."
)


def prompt_rows(groups: dict) -> list[dict]:
    """One row per prompt: its answer, the referent's edge, the top head and its attention."""
    out = []
    for name, g in groups.items():
        for r in g["rows"]:
            top = r["heads"][0] if r["heads"] else {}
            out.append(
                {
                    "group": name,
                    "prompt": r["prompt"],
                    "answer (a - b)": r["clean"],
                    "expected": "+" if r["sign"] > 0 else "-",
                    "referent": r["referent"],
                    "edge from": r["edge"][1] if r["edge"] else "none",
                    "edge": r.get("edge_value", float("nan")),
                    "top head": top.get("head", "none"),
                    "loading": top.get("loading", float("nan")),
                    "score": top.get("score", float("nan")),
                    "attention to referent": r.get("attention_clean", float("nan")),
                    "to other": r.get("attention_other_clean", float("nan")),
                    "score - other's": top.get("difference", float("nan")),
                }
            )
    return out


def term_rows(groups: dict) -> list[dict]:
    """The listed terms of every explained head: ``score`` and, with another candidate, ``difference``."""
    out = []
    for g in groups.values():
        for r in g["rows"]:
            for h in r["heads"]:
                for kind in ("terms", "difference_terms"):
                    for rank, (q, k, v) in enumerate(h.get(kind, []), 1):
                        out.append(
                            {
                                "prompt": r["prompt"],
                                "head": h["head"],
                                "of": "score" if kind == "terms" else "referent - other",
                                "rank": rank,
                                "query node": q,
                                "key node": k,
                                "term": v,
                            }
                        )
    return out


def tests_table(groups: dict) -> list[dict]:
    """One row per group, test and baseline: the summary's means, intervals and counts."""
    out = []
    for name, g in groups.items():
        for test in TESTS:
            t = g["summary"][test]
            if not t.get("n"):
                out.append({"group": name, "test": test, "prompts": 0})
                continue
            for control in CONTROLS:
                out.append(
                    {
                        "group": name,
                        "test": test,
                        "matched on": control,
                        "prompts": t["n"],
                        "twin pairs": t["pairs"],
                        "answer, named": _ci(t["logit"]),
                        "answer, matched": _ci(t[f"{control}_logit"]),
                        "named - matched": _ci(t[f"logit_vs_{control}"]),
                        "attention, named": _ci(t["attention"]),
                        "attention, matched": _ci(t[f"{control}_attention"]),
                        "attention, named - matched": _ci(t[f"attention_vs_{control}"]),
                        "beats every matched": _count(t[f"beats_every_{control}"]),
                        "left out (shared)": t.get("shared", 0),
                    }
                )
    return out
