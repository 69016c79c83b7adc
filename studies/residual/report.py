"""The residual study's report: gradients through depth in random stacks, then the trained model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.report import Report, figures
from studies.residual.config import SETTINGS, ResidualConfig
from studies.residual.trained import SENTENCES

TITLE = "The residual stream as a highway"
SUBTITLE = "Small writes into a running sum; the gradient rides the identity path through depth."


def build_report(
    report: Report,
    cfg: ResidualConfig,
    model: str | None,
    grads: pd.DataFrame,
    sum_error: float,
    trained: dict | None,
    skipped: str | None,
) -> Report:
    """Fill ``report`` from the measured tables, and return it.

    Args:
        model: The trained model's name; ``trained`` holds its measurements, or is ``None`` when ``skipped``
            says why it was not measured (``None`` too when no model was asked for).
    """
    report.add_section(
        "Hypothesis and metric",
        "Every sublayer adds to the stream rather than replacing it. If the stream is a highway, writes are "
        "small next to it, the stream turns gradually towards the final prediction, the prediction splits "
        "into "
        "direct contributions, and the gradient reaches early layers through the identity path whatever the "
        "depth. Random stacks: d_model "
        f"{cfg.d_model}, {cfg.n_heads} heads, LayerNorm, depths {list(cfg.depths)}, {cfg.seeds} seeds each, "
        "float64; the gradient ratio is |dL/d stream at block 0| over |dL/d stream at the last block|, a "
        "geometric mean over seeds with a 95% interval on its log10.",
    )
    g = grads.set_index(["setting", "depth"])
    d_max = max(cfg.depths)

    def at(label: str, column: str = "log10_grad_first") -> float:
        return float(g.loc[(label, d_max), column])

    report.add_section(
        "Gradient and signal through depth (random stacks)",
        f"Without norms the claim holds in its plain form. At depth {d_max} with the skip path, the "
        "gradient at "
        f"the first block is 10^{at('no norm, residual'):.1f} "
        f"(10^{at('no norm, residual', 'log10_ratio_first_to_last'):.2f} "
        "times that at the last block); with the skip path cut by hooks it is "
        f"10^{at('no norm, no residual'):.0f}: each sublayer, with weights N(0, 0.02), shrinks it, and "
        "past a "
        "few dozen blocks it underflows even in float64 (floored at 1e-300).\n\n"
        "With LayerNorm in every block the picture changes, and the seed's claim is refuted in its gradient "
        "form: the norms rescale each sublayer's input, so cutting the skip path leaves the gradient at the "
        f"first block at 10^{at('pre-norm, no residual'):.1f} (pre-norm) and "
        f"10^{at('post-norm, no residual'):.1f} (post-norm), against 10^{at('pre-norm, residual'):.1f} and "
        f"10^{at('post-norm, residual'):.1f} with it. What collapses instead is the signal: without the skip "
        "path every position of the final stream ends up holding the same vector (token diversity "
        f"{at('pre-norm, no residual', 'final_token_diversity'):.1g} pre-norm, "
        f"{at('post-norm, no residual', 'final_token_diversity'):.1g} post-norm, against "
        f"{at('pre-norm, residual', 'final_token_diversity'):.2f} and "
        f"{at('post-norm, residual', 'final_token_diversity'):.2f} with it), the rank collapse of stacked "
        "attention (Dong et al. 2021); the gradient that still arrives carries no information about which "
        "token is where. So the highway is what keeps both the signal and a useful gradient; norms alone "
        "keep only the gradient's size.",
    )
    for column, title, ylabel in (
        ("log10_grad_first", "Gradient at the first block (log10)", "log10 |dL/dx|"),
        ("final_token_diversity", "Token diversity of the final stream", "|x - mean_pos x| / |x|"),
    ):
        ys = {}
        for label, *_ in SETTINGS:
            part = grads[grads.setting == label].sort_values("depth")
            ys[label] = part[column].to_numpy()
        report.add_figure(
            column,
            figures.line_plot(np.array(cfg.depths), ys, title=title, xlabel="depth (blocks)", ylabel=ylabel),
        )
    report.add_table(
        "gradients", grads, caption="Per setting and depth: means over seeds (log10 for gradients)."
    )
    report.add_text(
        f"Check: in a pre-norm random model the final stream equals the sum of the embeddings and every "
        f"attention and MLP write to within {sum_error:.2g}."
    )
    for label in ("no norm, residual", "no norm, no residual", "pre-norm, no residual"):
        row = g.loc[(label, d_max)]
        report.add_headline(
            f"log10 gradient at block 0, {label}, depth {d_max}",
            float(row.log10_grad_first),
            note=f"final token diversity {row.final_token_diversity:.2g}",
        )
    row = g.loc[("pre-norm, residual", d_max)]
    report.add_headline(
        f"log10 gradient ratio block 0 / last, pre-norm, residual, depth {d_max}",
        float(row.log10_ratio_first_to_last),
        ci=(float(row.log10_ratio_low), float(row.log10_ratio_high)),
        note="95% CI over seeds",
    )
    results = {"gradients": grads.to_dict(orient="records"), "stream_sum_error": sum_error}
    report.add_section("A trained model")
    if trained is None:
        report.add_text(
            f"Skipped the trained model: {skipped}."
            if skipped
            else "No trained model was asked for (--model '')."
        )
    else:
        results["trained"] = _trained_section(report, model, trained)
    report.add_section(
        "Conclusion",
        "With the skip path the gradient reaches the first of 96 blocks at the size it has at the last, "
        "with or without norms. Without it, an un-normed stack loses the gradient entirely; a normed one "
        "keeps "
        "the gradient's size but collapses every position onto one vector, so the claim holds for the signal "
        "and, without norms, for the gradient. In the trained model the writes are a fraction of the stream "
        "and the prediction is built up gradually, as a highway would have it.",
    )
    report.add_results(results)
    return report


def _trained_section(report: Report, model: str, trained: dict) -> dict:
    """The trained model's writes, logit lens and logit attribution; returns their numbers for the results."""
    norms, lens, dla, tops = trained["norms"], trained["lens"], trained["dla"], trained["tops"]
    report.add_text(
        f"**{model}**, {len(SENTENCES)} prompts, every position but the first. The writes are "
        "smaller "
        f"than the stream they join: attention writes {norms.attn_over_stream.median():.2f} and the MLP "
        f"{norms.mlp_over_stream.median():.2f} of the stream's norm (medians over layers; largest "
        f"{norms.attn_over_stream.max():.2f} and {norms.mlp_over_stream.max():.2f}). The stream after a "
        f"block keeps a cosine of {norms.cos_before_after.median():.2f} with the stream before it "
        "(median; "
        f"lowest {norms.cos_before_after.min():.2f}, at layer {int(norms.cos_before_after.idxmin())}). "
        f"Position 0 is apart: its stream reaches a norm of {norms.stream_norm_position0.max():.0f}, "
        f"against {norms.stream_norm.max():.0f} for the others."
    )
    report.add_figure(
        "write_norms",
        figures.line_plot(
            norms.layer,
            {
                "attention write / stream": norms.attn_over_stream,
                "MLP write / stream": norms.mlp_over_stream,
                "cos(stream before, after)": norms.cos_before_after,
            },
            title=f"{model}: writes against the stream",
            ylabel="ratio / cosine",
        ),
    )
    report.add_table("write_norms", norms, caption="Per layer; positions 1 and later unless marked.")
    by_depth = lens.groupby("depth").agg(
        prob=("prob", "mean"), rank=("rank", "median"), top1=("rank", lambda r: float((r == 0).mean()))
    )
    first_top = int(by_depth.index[by_depth.top1 >= 0.5].min()) if (by_depth.top1 >= 0.5).any() else None
    report.add_text(
        "Logit lens: the final top token's probability read from each layer's stream rises from "
        f"{by_depth.prob.iloc[0]:.2g} at the embeddings to {by_depth.prob.iloc[-1]:.2f} at the end; it "
        "is "
        "the top token of at least half the prompts from "
        + (
            f"stream {first_top} of {len(by_depth) - 1}"
            if first_top is not None
            else "no intermediate stream"
        )
        + f" on. Final top tokens: {', '.join(repr(t) for t in tops)}."
    )
    report.add_figure(
        "logit_lens",
        figures.line_plot(
            by_depth.index.to_numpy(),
            {"P(final top token)": by_depth.prob, "share of prompts where it is top-1": by_depth.top1},
            title=f"{model}: logit lens",
            xlabel="stream (0 = embeddings, L = final)",
            ylabel="probability / share",
        ),
    )
    report.add_table("logit_lens", lens, caption="Rank (0 = top) and probability of the final top token.")
    kind = dla.component.map(
        lambda c: "attention" if "H" in c else ("MLP" if "mlp" in c.lower() else "other")
    )
    by_kind = dla.assign(kind=kind).groupby("kind").value.sum()
    top = dla.reindex(dla.value.abs().sort_values(ascending=False).index).head(10)
    report.add_text(
        "Direct logit attribution of the final top token (mean over prompts; the parts sum to the logit, "
        f"{dla.value.sum():.2f}): attention heads {by_kind.get('attention', 0.0):.2f}, MLPs "
        f"{by_kind.get('MLP', 0.0):.2f}, embeddings and biases {by_kind.get('other', 0.0):.2f}. Largest "
        "components: "
        + ", ".join(f"{c} {v:+.2f}" for c, v in zip(top.component, top.value, strict=True))
        + "."
    )
    report.add_table("dla", dla, caption="Direct logit attribution per component, mean over prompts.")
    report.add_headline("median attention write / stream", float(norms.attn_over_stream.median()))
    report.add_headline("median MLP write / stream", float(norms.mlp_over_stream.median()))
    report.add_headline("median cos(stream before, after block)", float(norms.cos_before_after.median()))
    return {
        "write_norms": norms.to_dict(orient="records"),
        "logit_lens_prob": by_depth.prob.tolist(),
        "dla_by_kind": by_kind.to_dict(),
        "top_tokens": tops,
    }
