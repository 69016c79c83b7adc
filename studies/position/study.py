"""Attention alone has no notion of order.

Hypothesis. Without positional information and without a causal mask, self-attention, the MLP and the norms
all commute with a permutation of the tokens: permute the input and every output is permuted the same way,
exactly (up to float rounding). Positional schemes (learned, sinusoidal, rotary) break this symmetry; so does
a causal mask even with no positions at all, because a token sees a prefix whose length is its position.

Metric. On seeded random models (2 layers, d_model 64) for every positional scheme, causal and not: the
largest absolute difference between ``model(tokens[perm])`` and ``model(tokens)[perm]`` over random sequences
and permutations, relative to the logits' scale; and how well a ridge probe on the final stream recovers a
token's position (held-out R², chance 0). On the trained models: how much shuffling a sentence's words changes
each token's representation, layer by layer (1 - cosine between a token's vector in the original order and
in the shuffled order, mean over tokens with a 95% bootstrap interval over sentences), as they are and with
positions removed by hooks (MiniLM: every position's vector replaced by the mean over positions; SmolLM2: the
rotary rotation undone by handing ``hook_rot_q``/``hook_rot_k`` the unrotated queries and keys).

Run time: ``studies/position/README.md`` gives the recorded run's (``results/default.json``). A sentence and its
shuffles run as one batch, on one thread (``studies.threads``).
"""

from __future__ import annotations

from dataclasses import asdict

from tqdm import tqdm

from interp.registry import study_parser
from interp.study import start
from studies.position.config import PositionConfig
from studies.position.random_models import random_models_table
from studies.position.report import SUBTITLE, TITLE, build_report
from studies.position.trained import trained_table

DESCRIPTION = (
    "Attention alone is blind to order: permutation equivariance, positional schemes, causal leakage."
)


def main(argv: list[str] | None = None) -> int:
    """Run the study: ``interp study position [--models a,b] [--out DIR] [--seed N] [--quiet]``."""
    parser = study_parser("position", DESCRIPTION, default_model=None, default_models=PositionConfig.models)
    run = start(parser, argv)
    cfg = PositionConfig(models=run.models)
    seed = run.args.seed
    table = random_models_table(cfg, seed, quiet=run.args.quiet)
    trained = {}
    for name in tqdm(cfg.models, desc="trained models", disable=run.args.quiet):
        trained[name] = trained_table(run.load(name), name, cfg, seed)
    report = run.report(TITLE, subtitle=SUBTITLE, config=asdict(cfg), model=", ".join(trained) or None)
    with run.step("figures and the report"):
        build_report(report, cfg, seed, table, trained, run.skipped)
    return run.finish(report)
