"""The attribution study's report: transcoder quality, each group's graphs, the interventions, the heads."""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.report import Report, figures, table_records
from studies.attribution import measure

QUALITY_COLUMNS = ["layer", "explained_variance", "l0", "dead_fraction", "dense_fraction"]
WHOLE = ["ce_clean", "ce_replacement", "ce_zero", "ce_recovered", "kl"]
TITLES = {"agreement": "Agreement twins: she - he", "winograd": "The seed's pair: animal - street"}


def _ci(x: dict, digits: int = 3) -> str:
    lo, hi = x["ci"]
    if not np.isfinite(lo):
        return f"{x['mean']:.{digits}g} (no interval: one schema)"
    return f"{x['mean']:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def write_report(report: Report, model, config, corpus, results: dict, seconds: float) -> None:
    """Fill ``report`` (written by the caller) with the sections, findings and ``results.json``."""
    report.add_section("Hypothesis and metric")
    report.add_text(
        "With a per-layer transcoder in place of every MLP, an attribution graph of a logit difference at the "
        "pronoun should show which features at the name (or the noun) carry it and through which heads; "
        "ablating the graph's top features should move the difference as the graph predicts (frozen: exactly "
        "minus their direct edges), and random features of matched activation should not. Effects are signed "
        "toward each prompt's expected answer, so ablating what carries the answer gives a negative number. "
        "What the model itself does on the prompts comes first: per twin pair, the switch sensitivity (the target "
        "in one twin minus the other's, signed toward the expected answer; 0 is none), tested by sign flips over "
        "pairs with its interval, and the bias (the target's mean over both twins) apart; a pair is right in both "
        "twins (chance 0.25) only when half its sensitivity exceeds its bias. "
        "Intervals are 95% (bootstrap over prompts, twins of a schema together, for means, fractions and "
        "shares). The frozen ablation is a consistency check, not evidence: its effect equals minus the selected "
        "features' direct edges by construction, and the features were selected by those edges. The evidence is "
        "the free ablation (the replacement model rerun with error terms) against random features of matched "
        "activation, compared with signed effects. A head's share of the loadings is read against a shuffled "
        "assignment (each prompt's loadings permuted over the heads)."
    )
    whole = _quality_section(report, config, corpus, results)
    out = {"transcoders": whole, "groups": {}}
    for name, group in results["groups"].items():
        out["groups"][name] = _group_section(report, model, config, name, group)
    if "dashboards" in results:
        out["dashboards"] = _dashboards_section(report, config, results)
    if "explanations" in results:
        out["explanations"] = _explanations_section(report, config, results["explanations"])
    if "supernodes" in results:
        out["supernodes"] = _supernodes_section(report, results["supernodes"])
    if "seed" in results:
        out["seed"] = _seed_section(report, results["seed"])
    if "seed_pairs" in results:
        out["seed_pairs"] = _seed_pairs_section(report, results["seed_pairs"])
    _findings(report, config, whole, out["groups"])
    if "seed" in out:  # after the graphs' findings: their first says whether intervention confirms them
        _seed_findings(report, out["seed"])
    if "seed_pairs" in out:
        report.add_finding(out["seed_pairs"]["answer"], PAIRS_TITLE)
    if "explanations" in out:
        _explanations_finding(report, out["explanations"]["summary"])
    report.add_section("Run")
    report.add_text(
        f"Wall time {seconds:.0f} s on {model.device} ({model.dtype}): transcoders "
        f"{'loaded from the cache' if results['trained'].reused else 'trained'} in "
        f"{results['trained'].seconds:.0f} s, evaluated in {results['eval_seconds']:.0f} s; graphs and tests "
        + ", ".join(f"{n} {g['seconds']:.0f} s" for n, g in results["groups"].items())
        + (f", the referent's edge {results['seed']['seconds']:.0f} s" if "seed" in results else "")
        + (
            f", the seed's question across pairs {results['seed_pairs']['seconds']:.0f} s"
            if "seed_pairs" in results
            else ""
        )
        + (f", dashboards {results['dashboards']['seconds']:.0f} s" if "dashboards" in results else "")
        + (f", explanations {results['explanations']['seconds']:.0f} s" if "explanations" in results else "")
        + (f", supernodes {results['supernodes']['seconds']:.0f} s" if "supernodes" in results else "")
        + f". Transcoders cached in a folder keyed by model, corpus and settings ({results['trained'].folder.name})."
    )
    out["seconds"] = seconds
    report.add_results(out)


def _quality_section(report: Report, config, corpus, results: dict) -> dict:
    q: pd.DataFrame = results["quality"]
    trained = results["trained"]
    report.add_section("Transcoders")
    report.add_text(
        f"One TopK transcoder per layer ({config.d_transcoder} features, k={config.k}) from each block's MLP "
        f"input (`ln2.hook_normalized`) to its output (`hook_mlp_out`), trained on {trained.n_rows:,} rows "
        f"({corpus.source}, {len(corpus.texts)} passages, windows of {config.context} tokens, {config.epochs} "
        "epochs); measured on the held-out 5% of the windows."
    )
    report.add_table("quality", q[[c for c in QUALITY_COLUMNS if c in q]], caption="Per layer, held-out text")
    first = q.iloc[0]
    whole = {c: float(first[c]) for c in WHOLE if c in q}
    whole["explained_variance_mean"] = float(q["explained_variance"].mean())
    whole["l0_mean"] = float(q["l0"].mean())
    whole["per_layer"] = table_records(q)
    report.add_headline("mean variance explained per layer", round(whole["explained_variance_mean"], 3))
    report.add_headline(
        "replacement model: CE loss recovered", round(whole.get("ce_recovered", float("nan")), 3),
        note="every MLP replaced, no error term; against zeroed MLPs",
    )  # fmt: skip
    report.add_text(
        f"The whole replacement (every MLP replaced at once, no error term): cross-entropy {whole['ce_clean']:.3f} "
        f"nats for the model, {whole['ce_replacement']:.3f} for the replacement, {whole['ce_zero']:.3f} with "
        f"the MLPs zeroed: CE recovered {whole['ce_recovered']:.3f}, KL {whole['kl']:.3f} nats. Mean L0 "
        f"{whole['l0_mean']:.1f}."
    )
    return whole


def _group_section(report: Report, model, config, name: str, group: dict) -> dict:
    s, rows = group["summary"], group["rows"]
    title = TITLES[name]
    report.add_section(title)
    switch = group.get("switch")
    if switch is not None:
        report.add_text(switch.verdict("the model on these prompts"))
        sens = switch.sensitivity
        finite = np.isfinite([sens.interval.low, sens.interval.high]).all()
        report.add_headline(
            f"{name}: switch sensitivity",
            round(sens.estimate, 3),
            ci=(sens.interval.low, sens.interval.high) if finite else None,
            unit="logits",
            note=f"toward the expected answer, 0 is none; {switch.n_pairs} twin pair"
            + ("s, sign-flip interval" if switch.n_pairs > 1 else ", no test")
            + f"; bias {switch.bias.estimate:+.2f}",
        )
    prompt_table = pd.DataFrame([_prompt_row(r) for r in rows])
    report.add_table(
        f"{name}_prompts", prompt_table,
        caption="Per prompt: the target at the last position, the graph's scores, and the change of the target when "
        f"its top {config.top} features are zeroed (graph prediction, frozen, free) and for matched random sets",
    )  # fmt: skip
    report.add_text(
        f"{s['n_prompts']} graphs of at most {config.max_feature_nodes} feature nodes. Replacement score "
        f"{_ci(s['replacement_score'])}, completeness {_ci(s['completeness_score'])}. Zeroing the top "
        f"{config.top} features by influence, signed toward the answer: graph prediction {_ci(s['predicted'])}, "
        f"frozen {_ci(s['frozen'])} (largest relative gap to the prediction "
        f"{s['frozen_max_relative_error']:.1e}), free {_ci(s['free'])}; random features of matched activation: "
        f"frozen {_ci(s['random_frozen'])}, free {_ci(s['random_free'])}. {_beats(s['top_beats_every_random'])}"
    )
    tables = group["features"]
    words = pd.concat(
        [
            t[t["role"] != "other"].groupby("role", sort=False).head(3).assign(prompt=p)
            for p, t in tables.items()
        ]
    )
    report.add_table(
        f"{name}_features", words[["prompt", "role", "layer", "position", "feature", "activation", "influence",
                                   "direct_edge"]],
        caption="The three most influential features at each word of each prompt", max_rows=200,
    )  # fmt: skip
    shares = group["head_shares"]
    order = np.argsort(-shares, axis=None)[:8]
    top_heads = [
        {"head": f"L{i // shares.shape[1]}H{i % shares.shape[1]}", "share": float(shares.flat[i])}
        for i in order
    ]
    asked = {f"L{layer}H{head}": float(shares[layer, head]) for layer, head in config.heads}
    wanted = list(
        dict.fromkeys([*map(tuple, config.heads), *(divmod(int(i), shares.shape[1]) for i in order)])
    )
    spread = measure.share_intervals(
        [r["loadings"] for r in rows], wanted, [r["schema"] for r in rows], config.seed
    )
    for h in top_heads:
        h.update(ci_low=spread[h["head"]]["ci"][0], ci_high=spread[h["head"]]["ci"][1])
    baseline = (
        next(iter(spread.values()))
        if spread
        else {"shuffled_mean": float("nan"), "shuffled_max_95": float("nan")}
    )
    report.add_table(
        f"{name}_heads",
        pd.DataFrame(top_heads),
        caption=f"Heads by share of the loadings (95% over schemas); shuffled assignment: any head "
        f"{baseline['shuffled_mean']:.1%} on average, the largest share {baseline['shuffled_max_95']:.1%} "
        "(95th percentile)",
    )
    fig = figures.heatmap_layer_head(
        shares, title=f"{title}: head loadings of the words' top features", cbar_label="share of |loadings|",
        vmin=0.0, mark=_marks(shares.shape, config.heads), mark_label="outlined: the heads asked about",
    )  # fmt: skip
    report.add_figure(f"{name}_heads", fig)
    sources = sum(len(r["loadings"]["sources"]) for r in rows)
    report.add_text(
        f"Head loadings of the edges from the top feature at each word ({sources} edges) to the target: "
        + ", ".join(f"{h} {_share(spread[h])}" for h in asked)
        + " of the summed absolute loadings (direct paths included); the largest: "
        + ", ".join(f"{h['head']} {_share(spread[h['head']])}" for h in top_heads[:4])
        + f". Under a shuffled assignment of each prompt's loadings to heads, a head carries "
        f"{baseline['shuffled_mean']:.1%} on average and the largest share is {baseline['shuffled_max_95']:.1%} "
        "or less in 95% of shuffles."
    )
    return {
        "switch": None if switch is None else switch.to_json(),
        "summary": s,
        "prompts": table_records(prompt_table),
        "features": table_records(words),
        "head_shares_asked": asked,
        "head_share_intervals": spread,
        "top_heads": top_heads,
        "role_shares": {r["prompt"]: r["role_shares"] for r in rows},
    }


def _role_share(summary: dict, role: str) -> str:
    """A word's share of the feature influence with its interval over schemas (``"33% [25%, 41%]"``)."""
    x = summary["role_shares"].get(role, {"mean": 0.0, "ci": [float("nan")] * 2})
    lo, hi = x["ci"]
    return f"{x['mean']:.0%}" + (f" [{lo:.0%}, {hi:.0%}]" if np.isfinite(lo) else "")


def _share(x: dict) -> str:
    lo, hi = x["ci"]
    where = f" [{lo:.1%}, {hi:.1%}]" if np.isfinite(lo) else ""
    return f"{x['share']:.1%}{where}"


def _beats(b: dict) -> str:
    where = f" [{b['ci'][0]:.2f}, {b['ci'][1]:.2f}]" if np.isfinite(b["ci"][0]) else ""
    return (
        f"Signed toward the answer, the top set's free effect is below that of every one of its random sets in "
        f"{b['count']} of {b['n']} prompts ({b['mean']:.2f}{where}; chance {b['chance']:.2f}, a top set no "
        "different from its random sets)."
    )


def _dashboards_section(report: Report, config, results: dict) -> dict:
    from studies.attribution.dashboards import FOLDER, summary_rows

    d = results["dashboards"]
    rows = summary_rows(d["records"])
    where: dict[tuple[int, int], list[str]] = {}
    for group in results["groups"].values():
        for prompt, table in group["features"].items():
            for r in table.head(config.top).itertuples():
                where.setdefault((int(r.layer), int(r.feature)), []).append(prompt)
    for row in rows:
        row["top in"] = ", ".join(where.get((row["layer"], row["feature"]), []))
    frame = pd.DataFrame(rows)
    page = f"{FOLDER}/features/{d['folder'].name}/index.html"
    n_tokens = next(iter(d["records"].values()))["n_tokens"] if d["records"] else 0
    report.add_section("The top features' dashboards")
    report.add_text(
        f"The {len(rows)} features among the top {config.top} by influence of any graph, each read over the "
        f"first {config.dashboard_texts} corpus passages ({n_tokens:,} tokens, each passage's first token not "
        f"counted): how often it fires, its largest activation, its top example (the token in [[ ]]) and the "
        f"tokens its decoder promotes. Their full dashboards (examples from each fifth of the activations, "
        f"histograms) are in `{page}` beside this report, in circuit-tracer's feature-file format."
    )
    report.add_table(
        "dashboards", frame, caption="The graphs' top features: density, top example, promoted tokens",
        max_rows=200,
    )  # fmt: skip
    return {"page": page, "n_tokens": n_tokens, "features": table_records(frame)}


def _explanations_section(report: Report, config, found: dict) -> dict:
    """The explanations of the top features, their scores and the shuffled-explanation baseline."""
    from studies.attribution.explanations import TOKENS

    s = found["summary"]
    who = (
        "no model: each names the tokens where the feature is strongest in the examples shown (a lexical baseline)"
        if config.explainer == TOKENS
        else f"{config.explainer}"
        + (
            " (the packaged SmolLM2-135M-Instruct, 4-bit GGUF (Q4_1), dequantized: a 135M explainer is weak, its "
            "explanations often restate a token or say nothing; an OpenAI-compatible endpoint with a larger model "
            "(--explainer URL) writes explanations worth reading)"
            if config.explainer == "smollm2-135m"
            else ""
        )
    )
    report.add_section("Explanations of the top features")
    report.add_text(
        f"Each feature with a dashboard gets an explanation written by {who}, from some of its activating "
        "examples, and is scored on others it was not written from, against examples where it does not fire. "
        "The baseline scores each feature with another feature's explanation (a derangement of the features, "
        f"seed {config.seed}), on the same examples. Chance is 0.5 for every score (embedding: AUC of the "
        "explanation's MiniLM similarity to activating against non-activating examples; detection and fuzzing: "
        "balanced accuracy). Intervals are 95%, resampling groups of schemas (twins together): each feature "
        "counts once, in the group joining the schemas it is top in with every schema sharing a top feature with "
        "them, so that no score is drawn twice as if independent. "
        f"{s['n_scored']} of {s['n_features']} features were explained and scored; the others are listed with "
        f"the reason. {_repeats(s)}"
    )
    lines = []
    for name, x in s["scorers"].items():
        lines.append(
            f"- {name} ({x['metric']}, chance {x['chance']}): true explanations {_ci(x['true'])}, shuffled "
            f"{_ci(x['shuffled'])}, paired difference (true - shuffled) {_ci(x['difference'])} over "
            f"{x['n_values']} features of {x['n_schemas']} schemas in {x['n_groups']} independent groups. Quartiles "
            "over features: true "
            f"{_quartiles(x['quartiles']['true'])}, shuffled {_quartiles(x['quartiles']['shuffled'])}."
        )
    report.add_text("\n".join(lines))
    first = next(iter(s["scorers"]), None)
    if first is not None and s["scorers"][first]["n_values"]:
        d = s["scorers"][first]["difference"]
        lo, hi = d["ci"]
        report.add_headline(
            f"explanations: true - shuffled {first} score",
            round(d["mean"], 3),
            ci=(lo, hi) if np.isfinite(lo) else None,
            note="paired per feature; 95% interval over schemas; 0 = no better than another feature's explanation",
        )
    frame = pd.DataFrame(
        [
            {
                "layer": r["layer"],
                "feature": r["feature"],
                "featureIndex": r["featureIndex"],
                "explanation": r.get("explanation", ""),
                **{f"{k} (true)": v for k, v in r.get("true", {}).items()},
                **{f"{k} (shuffled)": v for k, v in r.get("shuffled", {}).items()},
                "shuffled from": r.get("shuffled_from", ""),
                "error": r.get("error", ""),
            }
            for r in found["rows"]
        ]
    )
    report.add_table(
        "explanations", frame, caption="Each feature's explanation, its scores, and its scores with a deranged "
        "feature's explanation", max_rows=200,
    )  # fmt: skip
    return {"summary": s, "features": table_records(frame)}


def _explanations_finding(report: Report, s: dict) -> None:
    """The explanations' finding: the true score against chance, the paired difference against the shuffled
    baseline, and, when the explainer repeats itself, that the comparison says little. Added after the graphs'
    findings, whose first says whether the free intervention confirms the graphs."""
    title = "Explanations of the top features"
    first = next(iter(s["scorers"]), None)
    if first is None:
        return
    x = s["scorers"][first]
    if not x["n_values"]:
        report.add_finding(
            f"No explanation of the top features could be scored ({s['n_features']} features; the reasons are in "
            "the table), so there is no comparison with the shuffled baseline.",
            title,
        )
        return
    chance = x["chance"]
    low, high = x["true"]["ci"]
    against = (
        "one independent group of schemas, no interval"
        if not (np.isfinite(low) and np.isfinite(high))
        else "above chance"
        if low > chance
        else "below chance"
        if high < chance
        else f"at chance (the interval holds {chance})"
    )
    sentence = (
        f"Explanations of the top features ({first} score, chance {chance}): true {_ci(x['true'])}, {against}; "
        f"another feature's {_ci(x['shuffled'])}; true - shuffled {_ci(x['difference'])}: "
        f"{_verdict(*x['difference']['ci'])}."
    )
    common = s.get("most_common_explanation")
    if common and 2 * s["n_distinct_explanations"] <= s["n_features"]:
        sentence += (
            f" But the explainer wrote {s['n_distinct_explanations']} distinct explanations for {s['n_features']} "
            f"features ({common['text']!r} {common['count']} times): a feature and the one whose explanation it "
            "borrows often share a text, so these scores say little about the features."
        )
    report.add_finding(sentence, title)


def _verdict(lo: float, hi: float) -> str:
    """What the interval of true - shuffled allows one to say."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "one independent group of schemas, so no interval and no claim"
    if lo > 0:
        return "above the shuffled baseline (the interval excludes 0)"
    if hi < 0:
        return "**below** the shuffled baseline (the interval excludes 0): another feature's explanation fits better"
    return "not distinguishable from the shuffled baseline (the interval includes 0)"


def _quartiles(q: list) -> str:
    return " / ".join(f"{v:.2f}" for v in q) if q else "none"


def _repeats(s: dict) -> str:
    """How many distinct explanations the explainer wrote, and its most repeated one."""
    common = s.get("most_common_explanation")
    if not common:
        return "No explanation was written."
    return (
        f"{s['n_distinct_explanations']} distinct explanations; the most common, {common['text']!r}, for "
        f"{common['count']} features (where a feature's borrowed explanation is its own text, true and shuffled "
        "score alike)."
    )


def _supernodes_section(report: Report, found: dict) -> dict:
    """How much automatic supernodes shrink each graph, and the influence the collapsed graph keeps."""
    rows = pd.DataFrame(found["graphs"].values())
    report.add_section("Automatic supernodes")
    tolerance = rows["tolerance"].iloc[0] if len(rows) else float("nan")
    report.add_text(
        "Every graph's feature nodes kept by the pruned graph (the candidates) are grouped as `interp attribute "
        "--supernodes auto` groups them: same position, decoder cosine and cosine of outgoing edges above the "
        "criterion's thresholds, every pair in a group; groups are dissolved until the graph collapsed onto them "
        f"keeps its influence on the target within {tolerance:.0%} (influence kept = 1 - sum |I' - I| / sum I "
        "over the collapsed graph's units). The groups are saved in each graph file's qParams.supernodes "
        "(graphs/PROMPT/ beside this report). Means with 95% intervals over schemas."
    )
    lines = []
    for name, g in found["groups"].items():
        if not g["n_graphs"]:
            continue
        lines.append(
            f"- {TITLES.get(name, name)}: {g['n_graphs']} graphs, feature nodes {_ci(g['feature_nodes_before'])} "
            f"before and {_ci(g['feature_nodes_after'])} after (fraction left {_ci(g['shrink'])}); influence kept "
            f"{_ci(g['influence_kept'])}, smallest {g['min_influence_kept']:.3f}; "
            f"{g['graphs_without_groups']} graphs with no group."
        )
    report.add_text("\n".join(lines))
    report.add_table("supernodes", rows, caption="Per graph: feature nodes before and after, influence kept")
    return {"graphs": table_records(rows), "groups": found["groups"]}


def _marks(shape: tuple[int, int], heads) -> np.ndarray:
    marks = np.zeros(shape, dtype=bool)
    for layer, head in heads:
        marks[layer, head] = True
    return marks


def _prompt_row(r: dict) -> dict:
    return {
        "prompt": r["prompt"],
        "tokens": r["n_tokens"],
        "clean": r["clean"],
        "replacement": r["replacement_score"],
        "completeness": r["completeness_score"],
        "predicted": r["predicted"],
        "frozen": r["frozen"],
        "free": r["free"],
        "random free (mean)": float(np.mean(r["random_free"])),
        "top features": ", ".join(r["top"]),
    }


def _findings(report: Report, config, whole: dict, groups: dict) -> None:
    for name, group in groups.items():  # first what the model does: the switch sensitivity and the bias
        if group.get("switch") is not None:
            report.add_finding(f"{TITLES[name]}: {group['switch']['verdict']}", TITLES[name])
    ag = groups.get("agreement")
    if ag is not None:
        s = ag["summary"]
        free, rnd = s["free"], s["random_free"]
        confirmed = free["ci"][1] < rnd["ci"][0]  # signed: the top set lowers the answer's preference more
        report.add_finding(
            ("The free intervention confirms the graphs" if confirmed else "The free intervention does **not** "
             "confirm the graphs")
            + f": rerunning the replacement model with each agreement graph's top {config.top} features zeroed "
            f"moves she - he toward the answer by {_ci(free)} logits against {_ci(rnd)} for matched random "
            "features; "
            + ("the intervals do not overlap. " if confirmed else "the intervals overlap. ")
            + _beats(s["top_beats_every_random"]),
            TITLES["agreement"],
        )  # fmt: skip
        frozen, rnd_frozen = s["frozen"], s["random_frozen"]
        report.add_finding(
            f"Consistency check, not evidence: frozen (the graph's linear model), zeroing the top features moves "
            f"the answer's preference by {_ci(frozen)} against {_ci(rnd_frozen)} for matched random features, and "
            f"matches the graphs' prediction (largest relative gap {s['frozen_max_relative_error']:.1e}); both "
            "follow from how the features were chosen. Replacement score "
            f"{_ci(s['replacement_score'])}, completeness {_ci(s['completeness_score'])}.",
            TITLES["agreement"],
        )
        spread = ag["head_share_intervals"]
        asked = ", ".join(f"{h} {_share(spread[h])}" for h in ag["head_shares_asked"])
        lead = ", ".join(f"{h['head']} {_share(spread[h['head']])}" for h in ag["top_heads"][:3])
        base = next(iter(spread.values()))
        name = _role_share(ag["summary"], "name")
        report.add_finding(
            f"Features at the name hold {name} of the agreement graphs' feature influence; the heads carrying "
            f"the name's top features to the target: {asked} of the loadings; the largest are {lead} (a shuffled "
            f"assignment gives any head {base['shuffled_mean']:.1%} on average and a largest share up to "
            f"{base['shuffled_max_95']:.1%}).",
            TITLES["agreement"],
        )
    wg = groups.get("winograd")
    if wg is not None:
        rows = wg["prompts"]
        spread = wg["head_share_intervals"]
        asked = ", ".join(f"{h} {_share(spread[h])}" for h in wg["head_shares_asked"])
        words = np.mean([wg["role_shares"][r["prompt"]].get("animal", 0.0) for r in rows])
        report.add_finding(
            "The seed's pair: animal - street is "
            + ", ".join(f"{r['clean']:.2f} ({r['prompt']})" for r in rows)
            + f"; features at 'animal' hold {words:.1%} of the graphs' feature influence, and the heads "
            f"{asked} of the loadings from the words' top features (one schema: no interval).",
            TITLES["winograd"],
        )
    report.add_finding(
        f"The transcoders are small: mean variance explained {whole['explained_variance_mean']:.2f} per layer, "
        f"CE recovered {whole.get('ce_recovered', float('nan')):.2f} for the whole replacement.",
        "Transcoders",
    )


SEED_TITLE = "The seed's question: why 'it' means its referent"


def _seed_section(report: Report, found: dict) -> dict:
    """The referent's edge into the answer: its heads, their query-node x key-node terms, the intervention that
    tests them; the answer as the section's findings (:mod:`studies.attribution.seed`)."""
    from studies.attribution.seed_answer import SEED_METHOD, prompt_rows, term_rows, tests_table, verdict

    groups = found["groups"]
    report.add_section(SEED_TITLE)
    report.add_text(SEED_METHOD.format(**found["settings"]))
    prompts, terms, tests = (pd.DataFrame(f(groups)) for f in (prompt_rows, term_rows, tests_table))
    report.add_table(
        "seed_edges", prompts, caption="Per prompt: the referent's edge into the answer, its top head"
    )
    report.add_table(
        "seed_terms", terms, caption="The largest query-node x key-node terms of each top head's score (and of "
        "the referent-minus-other difference)", max_rows=400,
    )  # fmt: skip
    report.add_table("seed_tests", tests, caption="The named nodes removed, against matched random nodes")
    sentences = verdict(groups)
    for _, sentence in sentences:
        report.add_text(sentence)
    return {
        "groups": {n: {"summary": g["summary"], "prompts": g["rows"]} for n, g in groups.items()},
        "answer": [s for _, s in sentences],
        "answer_groups": [g for g, _ in sentences],
        "settings": found["settings"],
    }


def _seed_findings(report: Report, seed: dict) -> None:
    for group, sentence in zip(seed["answer_groups"], seed["answer"], strict=True):
        report.add_finding(sentence, SEED_TITLE if group == "winograd" else TITLES["agreement"])


PAIRS_TITLE = "The seed's question on every sensitive pair"


def _seed_pairs_section(report: Report, found: dict) -> dict:
    """Heads and query terms chosen on half of the schemas, tested on the other half against matched controls
    (:mod:`studies.attribution.seed_pairs`); the answer and its power (:mod:`studies.attribution.pair_answer`)."""
    from studies.attribution.pair_answer import (
        METHOD,
        jsonable,
        pairs_table,
        sentences,
        summarise,
        tests_table,
    )

    summary = summarise(found)
    report.add_section(PAIRS_TITLE)
    report.add_text(METHOD.format(**found["settings"]))
    said = sentences(found, summary)
    for _, sentence in said:
        report.add_text(sentence)
    report.add_table("seed_pairs_tests", pd.DataFrame(tests_table(summary)),
                     caption=f"The family of tests, Holm-corrected; 'detectable': the mean each test finds with 80% "
                     f"probability at level {summary['level_each']:.2g} (alpha over the family's size)")  # fmt: skip
    report.add_table(
        "seed_pairs_pairs", pd.DataFrame(pairs_table(found)), max_rows=200,
        caption="Per traced pair (twins together): its half, the twins' preferences, its switch sensitivity and "
        "bias, and the twin difference of the candidates' edges",
    )  # fmt: skip
    return {**jsonable(found, summary), "answer": said[-1][1], "sentences": [s for _, s in said],
            "seconds": found["seconds"]}  # fmt: skip
