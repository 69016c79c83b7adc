"""The recurrence study's report: accuracy and gradients against distance, path length and time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from interp.report import Report, figures
from studies.recurrence.config import RecurrenceConfig

TITLE = "What attention buys over recurrence"
SUBTITLE = "Recall a token d steps back: accuracy, gradient to the distant input, path length, time."


def build_report(
    report: Report, cfg: RecurrenceConfig, seed: int, table: pd.DataFrame, times: pd.DataFrame
) -> Report:
    """Fill ``report`` from the measured tables, and return it."""
    chance = 1 / cfg.n_symbols
    lstm = table[table.model == "lstm"].set_index("d")
    tf = table[table.model == "transformer"].set_index("d")
    d_max, d_min = max(cfg.distances), min(cfg.distances)
    report.add_section(
        "Hypothesis and metric",
        "A recurrent network connects two positions d apart through d sequential state updates; attention "
        "connects them in one hop. So the gradient from a loss to a distant input should shrink with d for "
        "the "
        "recurrent network and not for attention, long-range recall should be harder for it under the same "
        "budget, and its computation is sequential in the sequence length.\n\n"
        f"Task: a symbol (one of {cfg.n_symbols}), d distractors (from {cfg.n_distractors} other tokens), a "
        f"query token; the answer is the first symbol (chance {chance:.3f}). Both models train {cfg.steps} "
        "steps "
        f"of batch {cfg.batch} with Adam (lr {cfg.lr}), seed {seed}: an LSTM (embedding {cfg.d_model}, "
        f"hidden {cfg.d_hidden}, {int(lstm.parameters.iloc[0])} parameters at d = {d_min}) and a one-layer "
        f"two-head transformer (d_model {cfg.d_model}, sinusoidal positions, "
        f"{int(tf.parameters.iloc[0])} parameters). Accuracy on {cfg.n_eval} held-out sequences with a 95% "
        "Wilson interval. Gradient ratio: mean norm of d loss / d embedding at the first token divided by "
        "that at "
        "the query token, in float64.",
    )
    report.add_section(
        "Accuracy against distance",
        f"At d = {d_min} the LSTM reaches {lstm.accuracy[d_min]:.2f} and the transformer "
        f"{tf.accuracy[d_min]:.2f}; at d = {d_max}, {lstm.accuracy[d_max]:.2f} and {tf.accuracy[d_max]:.2f} "
        f"(chance {chance:.3f}).",
    )
    report.add_figure(
        "accuracy",
        figures.line_plot(
            np.log2(np.array(cfg.distances)),
            {"LSTM": lstm.accuracy.to_numpy(), "transformer": tf.accuracy.to_numpy()},
            ci={
                "LSTM": (lstm.accuracy_low.to_numpy(), lstm.accuracy_high.to_numpy()),
                "transformer": (tf.accuracy_low.to_numpy(), tf.accuracy_high.to_numpy()),
            },
            title=f"Recall accuracy after {cfg.steps} steps",
            xlabel="log2 d",
            ylabel="accuracy",
            baseline=chance,
            baseline_label="chance",
        ),
    )
    report.add_section(
        "Gradient to the distant input",
        f"At initialisation the LSTM passes {lstm.grad_ratio_init[d_min]:.2g} of the query's gradient to the "
        f"first token at d = {d_min} and {lstm.grad_ratio_init[d_max]:.2g} at d = {d_max}: it decays "
        "exponentially with distance. The transformer passes "
        f"{tf.grad_ratio_init[d_min]:.2g} and {tf.grad_ratio_init[d_max]:.2g}; its uniform attention at "
        "initialisation spreads the gradient over all d + 2 keys, so it shrinks like 1/d, not exponentially. "
        f"After training: LSTM {lstm.grad_ratio_trained[d_max]:.2g}, transformer "
        f"{tf.grad_ratio_trained[d_max]:.2g} at d = {d_max}.",
    )
    ys = {
        "LSTM, init": np.log10(lstm.grad_ratio_init.clip(lower=1e-300)).to_numpy(),
        "transformer, init": np.log10(tf.grad_ratio_init.clip(lower=1e-300)).to_numpy(),
        "LSTM, trained": np.log10(lstm.grad_ratio_trained.clip(lower=1e-300)).to_numpy(),
        "transformer, trained": np.log10(tf.grad_ratio_trained.clip(lower=1e-300)).to_numpy(),
    }
    report.add_figure(
        "gradient",
        figures.line_plot(
            np.log2(np.array(cfg.distances)),
            ys,
            title="Gradient at the first token relative to the query (log10)",
            xlabel="log2 d",
            ylabel="log10 ratio",
        ),
    )
    report.add_table("distances", table, caption="Both models at every distance.")
    report.add_section(
        "Path length and wall time",
        "Between the first token and the query the LSTM's signal passes d + 1 sequential cell updates; the "
        "transformer's passes one attention hop (per layer; here one layer). The same shows in time: the "
        "LSTM "
        "cell must be stepped once per token, while the transformer handles the sequence in one pass of "
        "matrix products (its cost grows with length through the query-key product, but not as sequential "
        "steps). Forward times, batch 8, width "
        f"{cfg.d_hidden}, one thread, median of {cfg.timing_repeats} runs; they depend on the machine and its load.",
    )
    pivot = times.pivot(index="seq_len", columns="method", values="ms")
    report.add_figure(
        "timing",
        figures.line_plot(
            np.log2(pivot.index.to_numpy()),
            {m: np.log10(pivot[m].to_numpy()) for m in pivot.columns},
            title="Forward wall time (log10 ms)",
            xlabel="log2 sequence length",
            ylabel="log10 ms",
        ),
    )
    report.add_table("timing", times, caption="Forward time per method and length.")
    n_max = max(cfg.timing_lengths)
    report.add_headline(
        f"LSTM accuracy, d = {d_max}",
        float(lstm.accuracy[d_max]),
        ci=(float(lstm.accuracy_low[d_max]), float(lstm.accuracy_high[d_max])),
        note=f"chance {chance:.3f}; 95% Wilson",
    )
    report.add_headline(
        f"transformer accuracy, d = {d_max}",
        float(tf.accuracy[d_max]),
        ci=(float(tf.accuracy_low[d_max]), float(tf.accuracy_high[d_max])),
        note=f"chance {chance:.3f}; 95% Wilson",
    )
    report.add_headline(
        f"gradient ratio at init, LSTM, d = {d_max}",
        float(lstm.grad_ratio_init[d_max]),
        note="first token / query token",
    )
    report.add_headline(
        f"gradient ratio at init, transformer, d = {d_max}",
        float(tf.grad_ratio_init[d_max]),
        note="first token / query token",
    )
    report.add_headline(
        f"LSTM cell loop / transformer pass, time at length {n_max}",
        float(pivot["LSTM cell loop"][n_max] / pivot["transformer, one pass"][n_max]),
        note="machine-dependent",
    )
    verdict = []
    if tf.grad_ratio_init[d_max] > 1e3 * lstm.grad_ratio_init[d_max]:
        verdict.append(
            "the gradient claim holds: the LSTM's gradient to a distant input vanishes exponentially "
            "while attention's shrinks only like 1/d"
        )
    if tf.accuracy[d_max] > lstm.accuracy[d_max] + 0.1:
        verdict.append(
            "under an equal budget the transformer recalls across long distances where the LSTM fails"
        )
    elif tf.accuracy[d_max] < 0.5:
        verdict.append(
            f"but with this small budget the transformer does not solve d = {d_max} either: its "
            "uniform initial attention dilutes the signal by 1/d, so one hop is necessary but not "
            "sufficient for fast learning"
        )
    report.add_section(
        "Conclusion", ("; ".join(verdict) or "the measurements are mixed; see the tables") + "."
    )
    report.add_results(
        {"distances": table.to_dict(orient="records"), "timing": times.to_dict(orient="records")}
    )
    return report
