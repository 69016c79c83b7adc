"""What attention heads specialise in.

Hypothesis. Multi-head attention lets each head track a different relation: the previous token, an earlier
copy of the current token, the token after such a copy (induction), a fixed sink, a fixed offset, or the
antecedent of a pronoun. If heads specialise, the heads that score highest on one relation are not the ones
that score highest on another, and scores are weakly correlated across heads.

Metric. Every head of each packaged model gets six scores, each the attention mass it puts on the keys the
relation names (``interp.analysis`` head scores where they exist): previous-token, duplicate-token and
induction (on random tokens repeated once, after the token the tokenizer starts a text with: BOS for SmolLM2,
``[CLS]`` for MiniLM, so that the sink is the same kind of position in both), first-token sink, a positional
score (1 minus the mean total variation distance between a head's attention row on one random sequence and its
mean row at the same position over sequences: 1 when attention depends on position only) and a coreference
score (attention from a pronoun to its antecedent minus attention to the other candidate noun, on 20
hand-written sentences). Then: the overlap of the top-k heads between scores (Jaccard), the Spearman rank
correlation of scores across heads, the share of heads whose best score clearly exceeds their others, and for
coreference the best head picked on half of the sentences and measured on the other half with a 95% bootstrap
interval (chance level: 0 difference).

Run time: ``studies/heads/README.md`` gives the recorded run's (``results/default.json``); it runs on one
thread (``studies.threads``).
"""

from __future__ import annotations

from dataclasses import asdict

from tqdm import tqdm

from interp.registry import study_parser
from interp.study import start
from studies.heads.config import HeadsConfig
from studies.heads.report import SUBTITLE, TITLE, add_conclusion, add_hypothesis, add_model_section
from studies.heads.scores import score_heads

DESCRIPTION = "What heads specialise in: previous-token, duplicate, induction, sink, positional, coreference."


def main(argv: list[str] | None = None) -> int:
    """Run the study: ``interp study heads [--models a,b] [--out DIR] [--seed N] [--quiet]``."""
    parser = study_parser("heads", DESCRIPTION, default_model=None, default_models=HeadsConfig.models)
    run = start(parser, argv)
    cfg = HeadsConfig(models=run.models)
    seed = run.args.seed
    report = run.report(TITLE, subtitle=SUBTITLE, config=asdict(cfg), model=", ".join(cfg.models) or None)
    add_hypothesis(report, cfg)
    results = {}
    for name in tqdm(cfg.models, desc="models", disable=run.args.quiet):
        with run.step(f"{name}: scoring every head"):
            results[name] = add_model_section(report, name, score_heads(run.load(name), cfg, seed), cfg, seed)
    with run.step("figures and the report"):
        add_conclusion(report, results, run.skipped)
    return run.finish(report)
