"""What attention buys over recurrence.

Hypothesis. A recurrent network carries information from position t to position t + d through d sequential
cell updates, so the gradient of a late loss with respect to an early input is a product of d Jacobians and
tends to vanish, and the computation cannot be parallelised over time. Attention connects any two positions
in one hop: the gradient to an early token does not shrink with distance, and a whole sequence is one
parallel pass.

Metric. A recall task: the first token (one of ``n_symbols``) is followed by d distractor tokens (from a
separate set) and a query token, and the model must output the first token at the query, for d in
{4, 16, 64, 256}. An LSTM and a one-layer transformer (``interp.HookedTransformer``, sinusoidal positions),
of similar size, train for the same number of steps with the same optimiser and seed. Reported: held-out
accuracy with a 95% Wilson interval (chance 1/n_symbols); the norm of the gradient of the loss with respect
to the first token's embedding, relative to that of the query's own embedding, at initialisation and after
training (computed in float64 so that tiny values do not underflow; for the transformer through a hook on
``hook_embed``); the path length between the first token and the query (sequential steps); and wall time
against sequence length of an LSTM cell stepped over the sequence, the fused LSTM, and one transformer pass.

Run time and findings: ``studies/recurrence/README.md``, from the recorded run (``results/default.json``).
Everything runs on one thread (``studies.threads``): these models are too small to split, and threads on two
shared cores spend their time waiting for each other.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd
from tqdm import tqdm

from interp.registry import count, counts, study_parser
from interp.study import start
from studies.recurrence.config import RecurrenceConfig
from studies.recurrence.report import SUBTITLE, TITLE, build_report
from studies.recurrence.timing import timing
from studies.recurrence.training import run_distance

DESCRIPTION = (
    "Attention against recurrence: long-range recall, gradient to distant inputs, path length, time."
)


def main(argv: list[str] | None = None) -> int:
    """Run the study: ``interp study recurrence [--steps N] [--distances 4,16] [--out DIR] [--seed N]``."""
    parser = study_parser(
        "recurrence", DESCRIPTION, default_model=None, cpu_only="its timings compare CPU loops"
    )
    parser.add_argument(
        "--steps", type=count(1), default=RecurrenceConfig.steps, help="training steps per model"
    )
    parser.add_argument(
        "--distances",
        type=counts(1),
        default=RecurrenceConfig.distances,
        help="distances d, comma separated (default: %(default)s)",
    )
    run = start(parser, argv)
    cfg = RecurrenceConfig(steps=run.args.steps, distances=run.args.distances)
    seed = run.args.seed
    rows = []
    for d in tqdm(cfg.distances, desc="distance", disable=run.args.quiet):
        rows.extend(run_distance(cfg, d, seed))
    table = pd.DataFrame(rows)
    with run.step("timing both models over sequence lengths"):
        times = timing(cfg, seed)
    report = run.report(TITLE, subtitle=SUBTITLE, config={**asdict(cfg), "d_vocab": cfg.d_vocab})
    with run.step("figures and the report"):
        build_report(report, cfg, seed, table, times)
    return run.finish(report)
