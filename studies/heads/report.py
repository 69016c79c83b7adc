"""The heads study's report: per model, the best heads, heatmaps of every score, and specialisation."""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.report import Report, figures
from studies.heads.config import SCORES, HeadsConfig
from studies.heads.inputs import COREFERENCE, SCHEMAS
from studies.heads.specialisation import coreference_holdout, specialisation

TITLE = "What attention heads specialise in"
SUBTITLE = "Six relations scored on every head; do different heads track different relations?"


def add_hypothesis(report: Report, cfg: HeadsConfig) -> None:
    """The opening section: what specialisation would look like, and how each score is measured."""
    report.add_section(
        "Hypothesis and metric",
        "If heads specialise, the heads that score highest on one relation are not those that score "
        "highest on "
        "another, and the scores are weakly correlated across heads. Scores are attention masses (0 to 1; "
        "coreference is a difference, -1 to 1). Previous-token, duplicate-token, induction and first-token: "
        f"{cfg.batch} sequences of {cfg.seq_len} random tokens repeated once, after the tokenizer's start token "
        f"(BOS, or [CLS] for a BERT tokenizer). Positional: {cfg.batch} "
        "unrepeated random sequences; 1 - mean total variation to the mean row at the same position. "
        f"Coreference: {len(COREFERENCE)} hand-written sentences, attention from the pronoun to the "
        "antecedent "
        "minus to the other candidate.",
    )


def add_model_section(report: Report, name: str, scores: dict, cfg: HeadsConfig, seed: int) -> dict:
    """Heatmaps, tables and numbers for one model; returns its results."""
    spearman, jaccard, summary = specialisation(scores, cfg.top_k)
    n_layers, n_heads = scores["previous_token"].shape
    rows = []
    for score in SCORES:
        values = scores[score]
        layer, head = divmod(int(values.argmax()), n_heads)
        rows.append(
            {
                "score": score,
                "best_head": f"L{layer}H{head}",
                "best": float(values.max()),
                "median_head": float(values.median()),
                "heads_above_0.5": int((values > 0.5).sum()),
            }
        )
    best = pd.DataFrame(rows)
    hold = coreference_holdout(scores["coreference_items"], cfg.n_boot, seed, SCHEMAS)
    b = best.set_index("score")
    report.add_section(f"{name}: {n_layers} layers x {n_heads} heads")
    report.add_text(
        "Best head per score, against the median head: "
        + "; ".join(
            f"{r.score} {r.best_head} {r.best:.2f} (median {r.median_head:.2f})" for r in best.itertuples()
        )
        + f". Across the {n_layers * n_heads} heads the scores are weakly related: mean Spearman correlation "
        f"between two scores {summary['mean_offdiag_spearman']:.2f} (largest in size "
        f"{summary['max_offdiag_spearman']:.2f}), mean Jaccard overlap of top-{cfg.top_k} sets "
        f"{summary['mean_offdiag_jaccard']:.2f}; {summary['heads_in_two_top_k']} of the "
        f"{summary['top_k_heads']} heads in some top-{cfg.top_k} are in two or more. "
        f"{summary['share_specialist']:.0%} of heads rank clearly higher (by 25 percentile points) on one "
        "score "
        "than on any other."
    )
    report.add_text(
        f"Coreference: the best head chosen on {hold['n_fit']} sentences (L{hold['layer']}H{hold['head']}, "
        f"{hold['fit']:+.2f}) puts {hold['test']:+.2f} more attention on the antecedent than on the other "
        "noun in "
        f"the {hold['n_test']} held-out sentences (95% CI over schemas {hold['low']:+.2f} to "
        f"{hold['high']:+.2f}; chance 0; right in {hold['correct_share']:.0%} of them [{hold['correct_low']:.0%}, "
        f"{hold['correct_high']:.0%}], chance 50%; mirrored "
        "sentence pairs are held out together). "
        + (
            "The interval excludes 0, so some head does prefer the antecedent."
            if hold["low"] > 0
            else "The interval includes 0: on these sentences no head reliably prefers the antecedent, which "
            "does not "
            "support the seed's picture of a head that resolves 'it' by attention alone."
        )
        + f" The best average over all 20 is {b.loc['coreference', 'best']:+.2f}."
    )
    slug = name.replace("-", "_")
    for score in SCORES:
        report.add_figure(
            f"{slug}_{score}",
            figures.heatmap_layer_head(
                scores[score],
                title=f"{name}: {score.replace('_', ' ')} score",
                cbar_label="score",
                center=0.0 if score == "coreference" else None,
                vmin=-1.0 if score == "coreference" else 0.0,  # a share of attention, or a difference of two
                vmax=1.0,
                annotate=n_layers * n_heads <= 100,
            ),
        )
    report.add_table(f"{slug}_best", best, caption="Best head per score.")
    report.add_table(f"{slug}_spearman", spearman.reset_index(names="score"), caption="Spearman correlation.")
    report.add_table(
        f"{slug}_jaccard", jaccard.reset_index(names="score"), caption=f"Top-{cfg.top_k} Jaccard."
    )
    long = pd.concat(
        [
            pd.DataFrame(
                {
                    "layer": np.repeat(np.arange(n_layers), n_heads),
                    "head": np.tile(np.arange(n_heads), n_layers),
                    "score": s,
                    "value": scores[s].flatten().numpy(),
                }
            )
            for s in SCORES
        ]
    )
    report.add_table(f"{slug}_scores", long, caption="Every score of every head.", max_rows=60)
    report.add_headline(
        f"{name}: mean Spearman between scores",
        summary["mean_offdiag_spearman"],
        note="across heads; 0 = unrelated",
    )
    report.add_headline(
        f"{name}: best previous-token score",
        float(b.loc["previous_token", "best"]),
        note=f"{b.loc['previous_token', 'best_head']}; "
        f"median head {b.loc['previous_token', 'median_head']:.2f}",
    )
    report.add_headline(
        f"{name}: held-out coreference preference",
        hold["test"],
        ci=(hold["low"], hold["high"]),
        note="antecedent minus other noun; chance 0; 95% bootstrap CI",
    )
    return {
        "best": best.to_dict(orient="records"),
        "summary": summary,
        "coreference_holdout": hold,
        "scores": {s: scores[s].tolist() for s in SCORES},
    }


def add_conclusion(report: Report, results: dict, skipped: dict[str, str]) -> None:
    """The models skipped (default ones not installed), the conclusion, and ``results.json``'s results."""
    if skipped:
        report.add_section("Skipped", "\n\n".join(f"**{n}**: {r}." for n, r in skipped.items()))
    report.add_section(
        "Conclusion",
        "Where the scores above are weakly correlated and the top heads differ between relations, heads do "
        "track different relations, as claimed; the coreference numbers say whether a head tracks a "
        "pronoun's "
        "antecedent, which is the seed's own example, and are reported with a held-out test because "
        "picking the "
        "best of hundreds of heads on the same sentences would overstate it.",
    )
    report.add_results({"models": results, "skipped": skipped})
