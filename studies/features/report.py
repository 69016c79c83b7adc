"""The features study's report: dictionary quality, separating features, causal tests, feature cards."""

from __future__ import annotations

import pandas as pd

from interp.report import Report, figures, table_records
from interp.sae.feature_report import add_feature_section


def write_report(report: Report, model, config, corpus, results: dict, seconds: float) -> None:
    report.add_section("Hypothesis and metric")
    report.add_text(
        "The coreference study found SmolLM2's agreement signal reaching the final position's residual stream "
        "between layers 25 and 27 (heads L25H2 and L26H2). A TopK sparse autoencoder trained on ordinary text "
        f"at {', '.join(f'`{h}`' for h in results['hooks'])} should have features that tell the feminine twin "
        "from the masculine one at the final position, on held-out pairs; zeroing them should move the pronoun "
        "logit difference more than zeroing random features of matched density; attribution to the features "
        "and the error node should find them, and exact patching confirm it. Intervals are 95% (bootstrap "
        "over held-out folds or pairs; Wilson for fractions)."
    )
    report.add_section("Data")
    report.add_text(
        f"Training text: {corpus.source}, {len(corpus.texts)} passages chosen by seed from "
        f"{corpus.n_texts_available} ({corpus.bytes:,} bytes on disk); cut into windows of {config.context} "
        f"tokens, 5% held out for evaluation; {results['n_train_rows']:,} training rows per hook. Twin pairs: "
        f"{results['n_pairs']} agreement pairs whose answers are a feminine and a masculine pronoun (same "
        f"token length), {results['n_select']} used to select features, the rest to test them."
    )
    out: dict = {
        "corpus": {"source": corpus.source, "passages": len(corpus.texts), "bytes": corpus.bytes},
        "n_pairs": results["n_pairs"],
        "n_select": results["n_select"],
        "layers": {},
    }
    for layer in results["layers"]:
        out["layers"][layer["hook"]] = _layer_section(report, model, config, layer)
    report.add_section("Run")
    report.add_text(
        f"Wall time {seconds:.0f} s on {model.device} ({model.dtype}); the manifest records it too."
    )
    report.add_results(out)
    report.write()


def _layer_section(report: Report, model, config, r: dict) -> dict:
    """One layer's sections: quality, separating features, causal tests, feature cards; its results."""
    hook, name = r["hook"], f"L{r['layer']}"
    _quality_section(report, config, r, hook, name)
    _separating_section(report, r, hook, name)
    _causal_section(report, config, r, hook, name)
    add_feature_section(
        report, f"{name}_cards", f"{hook}: the top features", r["contexts"], r["logits"],
        intro="Top activating contexts on held-out text (the activating token marked) and direct logit effects.",
        max_features=6, histograms=3,
    )  # fmt: skip
    q, sep, a, att = r["quality"], r["separating"], r["ablation"], r["attribution"]
    return {
        "quality": table_records(q),
        "separating": table_records(sep),
        "ablation": a,
        "attribution": table_records(att),
        "density_top": r["density_top"],
        "history_last": r["history"][-1],
    }


def _quality_section(report: Report, config, r: dict, hook: str, name: str) -> None:
    report.add_section(f"{hook}: dictionary quality")
    q = r["quality"]
    report.add_table(
        f"{name}_quality", q, caption="Held-out text, mean over 4 folds with 95% bootstrap intervals"
    )
    get = q.set_index("metric")
    for metric, label in (
        ("explained_variance", "explained variance"),
        ("ce_recovered_zero", "CE loss recovered"),
    ):
        row = get.loc[metric]
        report.add_headline(
            f"{name} {label}", round(float(row["value"]), 4), ci=(float(row["ci_low"]), float(row["ci_high"])),
            note=f"{config.d_sae} latents, k={config.k}; 95% bootstrap over folds",
        )  # fmt: skip
    history = pd.DataFrame(r["history"])
    fig = figures.line_plot(
        history["step"].tolist(), {"fraction of variance unexplained": history["fvu"].to_numpy()},
        title=f"{hook}: training", xlabel="step", ylabel="FVU (training batch)",
    )  # fmt: skip
    report.add_figure(f"{name}_training", fig)
    report.add_text(
        f"Trained in {r['train_seconds']:.0f} s; L0 {get.loc['l0', 'value']:.1f}, dead fraction "
        f"{get.loc['dead_fraction', 'value']:.3f}, CE loss recovered against mean ablation "
        f"{get.loc['ce_recovered_mean', 'value']:.3f} [{get.loc['ce_recovered_mean', 'ci_low']:.3f}, "
        f"{get.loc['ce_recovered_mean', 'ci_high']:.3f}]."
    )


def _separating_section(report: Report, r: dict, hook: str, name: str) -> None:
    report.add_section(f"{hook}: features that separate the twins")
    sep = r["separating"]
    report.add_table(
        f"{name}_separating", sep,
        caption="Selected by selectivity on the selection pairs; mean difference and sign agreement on held-out pairs",
    )  # fmt: skip
    if len(sep):
        best = sep.iloc[0]
        report.add_headline(
            f"{name} best feature: held-out sign agreement",
            round(float(best["sign_agreement"]), 3),
            ci=(float(best["sign_agreement_ci_low"]), float(best["sign_agreement_ci_high"])),
            note=f"feature {int(best['feature'])} ({best['direction']}); 95% Wilson; chance 0.5 if active",
        )
        report.add_text(
            f"Best: feature {int(best['feature'])} ({best['direction']}), active in {int(best['active_test_pairs'])} "
            f"of {int(best['n_test'])} held-out pairs; feminine-minus-masculine difference "
            f"{best['mean_test']:.3g} [{best['mean_test_ci_low']:.3g}, {best['mean_test_ci_high']:.3g}], sign "
            f"agreement {best['sign_agreement']:.2f} [{best['sign_agreement_ci_low']:.2f}, "
            f"{best['sign_agreement_ci_high']:.2f}]. A pair where the feature is silent in both twins counts "
            "against agreement."
        )
    if len(sep):
        found = float(sep["sign_agreement_ci_low"].max()) > 0.5
        report.add_text(
            "**Verdict:** "
            + (
                "at least one feature separates the held-out twins above chance (its interval lies above 0.5)."
                if found
                else "no feature separates the held-out twins reliably: the best sign agreement's interval does not "
                "lie above 0.5, and the selected features are silent in most held-out pairs. At this scale (see "
                "Data) the dictionary has not given the agreement signal features of its own; the attribution "
                "below shows how much of it stays in the error node. `--texts`, `--d-sae`, `--epochs` and "
                "`--data` scale the run up."
            )
        )


def _causal_section(report: Report, config, r: dict, hook: str, name: str) -> None:
    report.add_section(f"{hook}: causal tests")
    a = r["ablation"]
    lo, hi = a["top_ci"]
    r_lo, r_hi = a["random_ci"]
    report.add_headline(
        f"{name} ablating the top {config.top} features: change of logit difference",
        round(a["top_mean"], 4), ci=(lo, hi), unit="logits",
        note=f"random matched features: {a['random_mean']:.3g}; 95% bootstrap over {a['n_pairs']} pairs",
    )  # fmt: skip
    report.add_text(
        f"Zeroing the top {config.top} separating features at the final position of both twins (error term "
        f"kept) changes the signed pronoun logit difference by {a['top_mean']:.3g} [{lo:.3g}, {hi:.3g}] on "
        f"{a['n_pairs']} held-out pairs; {config.random_draws} sets of random features of matched density "
        f"change it by {a['random_mean']:.3g} [{r_lo:.3g}, {r_hi:.3g}]; "
        f"{a['fraction_random_as_large']:.0%} of the random sets change it as much as the top features."
    )
    att = r["attribution"]
    report.add_table(
        f"{name}_attribution", att,
        caption="Share of the twin difference: attribution patching (pooled) and exact patching of the top features",
    )  # fmt: skip
    report.add_text(
        f"Attribution between twins (pooled clean minus corrupt: {r['attribution_gap']:.3g}): the error node "
        f"carries {att.set_index('node').loc['error', 'attribution']:.3g} of it and all features "
        f"{att.set_index('node').loc['all features', 'attribution']:.3g}; the rows above compare each top "
        "feature's estimate with its exact patch."
    )
