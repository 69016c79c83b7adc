"""The seed's question across pairs, answered: the family of reported tests with Holm's correction, each test's
power, the sentences that state the answer and the report's tables.

A mechanism is reported only where the units chosen on the selection half beat *both* matched controls on the
test half and are above zero there, each after the family's correction. Otherwise the answer is "no consistent
mechanism at this budget", with the effect each test could have detected: the standardized mean it finds with
80% probability at its number of test pairs and the family's strictest level (alpha over the family's size, the
level Holm's first step asks of the smallest p-value), and that effect in the data's units (times the standard
deviation of the test's per-pair values).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from interp.analysis.stats import correct_tests, detectable_effect

ALPHA = 0.05
POWER = 0.8
TITLES = {"winograd": "WSC273 and the seed's pair", "agreement": "agreement"}
KEYS = ("selected", "vs influence", "vs activation")


def tests(found: dict) -> list[tuple[str, dict]]:
    """The family: ``(name, entry)`` per reported test, an entry holding ``comparison`` (and, for held-out
    tests, the per-pair ``values``, their ``sd`` and the count against chance)."""
    out = []
    for data, d in found["data"].items():
        s = d["sensitivity"]
        if s["test"] is not None:
            values = np.array([p["preference"][0] - p["preference"][1] for p in s["values"]])
            sd = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
            out.append(
                (f"{data}: switch sensitivity, every usable pair", {"comparison": s["test"], "sd": sd})
            )
        for unit, label in (("heads", "heads"), ("terms", "query terms")):
            for key in KEYS:
                entry = d.get(unit, {}).get("test", {}).get(key)
                if entry is not None:
                    out.append((f"{data}: {label} chosen on the selection half, {key}", entry))
        entry = d.get("score", {}).get("test", {}).get("selected")
        if entry is not None:
            out.append((f"{data}: the traced heads' key preference, twin difference", entry))
    return out


def summarise(found: dict) -> dict:
    """The family with its correction, each test's power, and the verdict per unit kind (``heads``,
    ``terms``): whether a mechanism was found."""
    family = tests(found)
    correction = correct_tests(
        "every test of the seed's question across pairs", [e["comparison"].p_value for _, e in family], ALPHA
    )
    each = ALPHA / max(1, len(family))
    rows = []
    for (name, e), adjusted in zip(family, correction.adjusted, strict=True):
        c = e["comparison"]
        d = detectable_effect(c.n_units, each, POWER)
        rows.append(
            {
                "test": name,
                "n": c.n_units,
                "mean": c.estimate,
                "ci": [c.interval.low, c.interval.high] if c.interval is not None else [math.nan, math.nan],
                "p": c.p_value,
                "holm_p": adjusted,
                "rejected": adjusted <= ALPHA,
                "positive": e.get("positive"),
                "chance": e.get("chance"),
                "binomial_p": e.get("binomial_p"),
                "detectable_d": d,
                "detectable": d * e["sd"] if math.isfinite(d) else math.inf,
                "sd": e["sd"],
            }
        )
    by_name = {r["test"]: r for r in rows}
    found_units = {}
    for data in found["data"]:
        for unit, label in (("heads", "heads"), ("terms", "query terms")):
            keyed = [by_name.get(f"{data}: {label} chosen on the selection half, {k}") for k in KEYS]
            if all(r is not None for r in keyed):
                found_units[f"{data} {unit}"] = all(r["rejected"] and r["mean"] > 0 for r in keyed)
    return {
        "tests": rows,
        "correction": correction.to_json(),
        "level_each": each,
        "power": POWER,
        "mechanism": found_units,
    }


METHOD = (
    "Every usable pair's switch sensitivity (the preference a - b in the twin expecting a minus that in the twin "
    "expecting b; positive: toward the expected referent) and bias (their mean); the {pairs} most sensitive "
    "pairs of each data set traced: in each twin's graph the edge from each candidate into the answer (one node "
    "for both twins where the candidate lies in the prefix they share), split exactly into the heads its paths "
    "pass last; a head's twin difference is its carry of those edges in the twin expecting a minus in the twin "
    "expecting b. The schemas are split in half (seed {seed}); on one half the {heads} heads with the largest "
    "mean twin difference are chosen, each with two controls of {pool} heads: the nearest in mean absolute "
    "loading (influence on the edges) and the nearest in attention to the candidates (activation); the other "
    "half tests them. For WSC273, the first {qk_heads} chosen heads' score for the first candidate's key minus "
    "the second's, in every pair, split into query-node parts of the graph's nodes; nodes at the prefix both "
    "twins share write the same in both and are left out of what can differ (their part, and the errors', "
    "tokens' and bias's, kept as shares); the {terms} (head, layer, feature) terms with the largest mean twin "
    "difference chosen on the same half, with controls of {pool} terms of the same head matched on influence on "
    "the target and on activation, and tested on the other half. Tests: sign flips over test pairs (each a "
    "schema, twins together) with the interval that inverts them; counts against chance 0.5; Holm over every "
    "test reported; power as the mean each test detects 80% of the time at its pairs and the family's strictest "
    "level."
)


def _num(x: float) -> str:
    return "-inf" if x == -math.inf else "inf" if x == math.inf else f"{x:+.3g}"


def _ci(r: dict) -> str:
    """``+0.52 [+0.10, +0.91]``: the mean and its interval, three significant digits."""
    return f"{_num(r['mean'])} [{_num(r['ci'][0])}, {_num(r['ci'][1])}]"


def _p(r: dict) -> str:
    return f"p = {r['p']:.2g}, Holm {r['holm_p']:.2g}"


def _count(r: dict, what: str) -> str:
    return (
        f"{what} in {r['positive']} of {r['n']} test pairs (chance {r['chance']:.1f}, binomial p = "
        f"{r['binomial_p']:.2g})"
    )


def _power(r: dict) -> str:
    if not math.isfinite(r["detectable_d"]):
        return f"at {r['n']} test pairs no sign-flip p-value can reach the family's level"
    return (
        f"80% power for a mean of {r['detectable']:.2g} ({r['detectable_d']:.2f} standard deviations of the "
        f"per-pair values) at {r['n']} test pairs"
    )


def sentences(found: dict, summary: dict) -> list[tuple[str, str]]:
    """``(data, sentence)``: per data set its sensitivity, its heads, (WSC273) the heads' key preference and the
    query terms; then the answer."""
    by_name = {r["test"]: r for r in summary["tests"]}
    out = []
    for data, d in found["data"].items():
        s, title = d["sensitivity"], TITLES[data]
        r = by_name.get(f"{data}: switch sensitivity, every usable pair")
        if r is None:
            continue
        bias = s["bias"]
        out.append(
            (
                data,
                f"Switch sensitivity ({title}, {s['n']} usable pairs): {_ci(r)} logits toward the expected "
                f"referent ({_p(r)}); {s['sensitive']} of {s['n']} pairs sensitive (chance {s['chance']:.1f}); "
                f"bias {bias.mean:+.2f} [{bias.low:+.2f}, {bias.high:+.2f}] (t-interval over pairs). Traced: the "
                f"{len(d['pairs'])} most sensitive, {d['heads']['selection_pairs'] if 'heads' in d else 0} "
                "schemas to choose on and the rest to test.",
            )
        )
        for unit, label in (("heads", "heads"), ("terms", "query terms")):
            if unit not in d or not d[unit]["units"]:
                if unit in d:
                    out.append(
                        (
                            data,
                            f"{label.capitalize()}: none has a positive mean twin difference on the selection half.",
                        )
                    )
                continue
            rows = [by_name[f"{data}: {label} chosen on the selection half, {k}"] for k in KEYS]
            names = ", ".join(f"{u['name']} ({u['selection_mean']:+.3g})" for u in d[unit]["units"])
            out.append(
                (
                    data,
                    f"{label.capitalize()} chosen on {d[unit]['selection_pairs']} schemas ({names}: mean twin "
                    f"difference there): on the other {d[unit]['test_pairs']}, {_ci(rows[0])} "
                    f"({_p(rows[0])}; {_count(rows[0], 'positive')}); above {label} matched on influence "
                    f"{_ci(rows[1])} ({_p(rows[1])}; {_count(rows[1], 'above')}); above those matched on "
                    f"activation {_ci(rows[2])} ({_p(rows[2])}). Power: {_power(rows[1])}.",
                )
            )
        r = by_name.get(f"{data}: the traced heads' key preference, twin difference")
        if r is not None:
            heads = ", ".join(d["score"]["heads"])
            out.append(
                (
                    data,
                    f"The traced heads ({heads}) prefer the expected referent's key over the other's by "
                    f"{_ci(r)} more in its own twin (test half; {_p(r)}; {_count(r, 'positive')}). "
                    f"Power: {_power(r)}.",
                )
            )
    out.append(("answer", answer(summary)))
    return out


def answer(summary: dict) -> str:
    """The one sentence: a mechanism found where held-out units beat both controls, or none, with power."""
    found = [k for k, v in summary["mechanism"].items() if v]
    if found:
        return (
            "**A consistent mechanism at this budget**: the units chosen on half of the schemas carry the twin "
            f"difference on the other half beyond both matched controls ({', '.join(found)}; Holm over "
            f"{len(summary['tests'])} tests)."
        )
    held = [r for r in summary["tests"] if r["test"].endswith("vs influence")]
    power = "; ".join(
        f"{r['test'].split(':')[0]} {r['test'].split(': ')[1].split(' chosen')[0]}: {_power(r)}" for r in held
    )
    untested = "No unit had a positive mean twin difference on the selection half, so nothing was tested."
    could = f"What the tests could have found: {power}." if held else untested
    return (
        "**No consistent mechanism at this budget.** No set of heads or query terms chosen on half of the "
        "schemas carries the twin difference on the other half beyond both matched controls (Holm over "
        f"{len(summary['tests'])} tests, family-wise error {ALPHA}). {could}"
    )


def tests_table(summary: dict) -> list[dict]:
    """One row per test of the family."""
    return [
        {
            "test": r["test"],
            "pairs": r["n"],
            "mean [95% CI]": _ci(r),
            "p": r["p"],
            "Holm p": r["holm_p"],
            "count (chance 0.5)": "" if r["positive"] is None else f"{r['positive']} of {r['n']}",
            "detectable (80%)": r["detectable"],
        }
        for r in summary["tests"]
    ]


def pairs_table(found: dict) -> list[dict]:
    """One row per traced pair, twins together: its half, preferences, sensitivity, bias, edges."""
    out = []
    for data, d in found["data"].items():
        for p in d["pairs"]:
            out.append(
                {
                    "data": data,
                    "schema": p["schema"],
                    "half": p["half"],
                    "a - b, expecting a": p["preference"][0],
                    "a - b, expecting b": p["preference"][1],
                    "sensitivity": p["sensitivity"],
                    "bias": p["bias"],
                    "edge twin difference": p["edge_difference"],
                    "attention-free part": p["direct_difference"],
                    **{f"{h} key preference": v for h, v in p.get("score_difference", {}).items()},
                }
            )
    return out


def jsonable(found: dict, summary: dict) -> dict:
    """The results as JSON values (comparisons and intervals in their own JSON form)."""

    def clean(x: Any) -> Any:
        if hasattr(x, "to_json"):
            return x.to_json()
        if isinstance(x, dict):
            return {k if isinstance(k, str) else str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return {"settings": found["settings"], "data": clean(found["data"]), "summary": clean(summary)}
