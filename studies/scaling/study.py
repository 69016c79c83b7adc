"""Why attention divides its scores by sqrt(d_k).

Hypothesis. With query and key components that are independent with unit variance, the dot product q·k of
two d_k-dimensional vectors has variance d_k. Fed to a softmax unscaled, scores whose spread grows like
sqrt(d_k) saturate it: the largest weight goes to 1, the entropy to 0, and the softmax's Jacobian, the factor
every gradient through attention passes, vanishes. Dividing by sqrt(d_k) restores unit variance, so the
pattern's statistics and the gradient stay the same at every width.

Metric. A Monte Carlo over d_k in {4, 8, ..., 1024} (fixed seed; ``n_queries`` queries, each scored against
``n_keys`` keys, components N(0, 1)): the empirical variance of q·k against d_k (95% bootstrap interval over
queries), and for scaled and unscaled scores the mean largest weight, the mean entropy (nats), the Frobenius
norm of the softmax Jacobian d softmax / d scores, and the norm of the gradient of a random unit-norm read-out
of the pattern with respect to the query vector (95% normal intervals over queries). Baselines: the uniform
pattern (entropy log n_keys, largest weight 1/n_keys) and the softmax of i.i.d. N(0, 1) scores, which is what
the scaled case should match. On the trained models (when their packages are installed): per layer, the
spread of the real scores within each query's row (the softmax is blind to a row's shift, so the within-row
standard deviation is what matters), the same spread before the division set against sqrt(d_head), and the
pattern's entropy as it is and as it would be without the division.

Run time: ``studies/scaling/README.md`` gives the recorded run's (``results/default.json``); it runs on one
thread (``studies.threads``).
"""

from __future__ import annotations

from dataclasses import asdict

import torch

from interp.registry import count, study_parser
from interp.study import start
from studies.scaling.config import ScalingConfig
from studies.scaling.montecarlo import monte_carlo, standard_normal_baseline
from studies.scaling.report import SUBTITLE, TITLE, build_report
from studies.scaling.trained import SENTENCES, trained_score_spread

DESCRIPTION = "Why divide by sqrt(d_k): score variance, softmax saturation and gradients, scaled vs unscaled."


def main(argv: list[str] | None = None) -> int:
    """Run the study: ``interp study scaling [--models a,b] [--n-queries N] [--out DIR] [--seed N]``."""
    parser = study_parser("scaling", DESCRIPTION, default_model=None, default_models=ScalingConfig.models)
    parser.add_argument(
        "--n-queries", type=count(2), default=ScalingConfig.n_queries, help="random queries per measurement"
    )
    run = start(parser, argv)
    cfg = ScalingConfig(models=run.models, n_queries=run.args.n_queries)
    seed = run.args.seed
    torch.manual_seed(seed)
    mc = monte_carlo(cfg, seed, quiet=run.args.quiet)
    with run.step("the standard-normal baseline"):
        baseline = standard_normal_baseline(cfg, seed)
    trained = {}
    for name in cfg.models:
        with run.step(f"{name}: score spread on real sentences"):
            model = run.load(name)
            trained[name] = trained_score_spread(model, SENTENCES)
            del model
    report = run.report(TITLE, subtitle=SUBTITLE, config=asdict(cfg), model=", ".join(trained) or None)
    with run.step("figures and the report"):
        build_report(report, cfg, seed, mc, baseline, trained, run.skipped)
    return run.finish(report)
