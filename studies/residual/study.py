"""The residual stream as a highway.

Hypothesis. Each sublayer adds its output to a running stream instead of replacing it, so (a) a layer's write
is small next to the stream it joins and the stream changes gradually, layer by layer, towards the final
prediction; (b) the prediction decomposes into the direct contributions of every component; and (c) the
gradient reaches the first layer through the identity path, undiminished by depth, where without the skip
path it would pass through every layer's Jacobian and collapse.

Metric. On a trained model (SmolLM2 by default; ``--model``), over a few sentences: per layer, the mean norm
of the attention and MLP writes against the norm of the stream they join, and the cosine between the stream
before and after the block (position 0, which in Llama-style models holds the attention sink's huge norm, is
reported apart); the logit lens (the rank and probability of the final top token read from each layer's
stream through the model's own final norm and unembedding); and the direct logit attribution of the final top
token to the embedding, every head and every MLP (``interp.analysis``). On seeded random stacks (d_model 64,
up to 96 layers, pre-norm and post-norm): the norm of the gradient of a cross-entropy loss with respect to the
embedding stream, relative to that at the input of the last block, with the skip path intact and cut by hooks
(``hook_attn_out`` returns ``attn_out - resid_pre`` and ``hook_mlp_out`` returns ``mlp_out - resid_mid``, so
the sum the block forms is the sublayer's output alone, and the identity's gradient cancels exactly);
geometric mean and 95% interval over seeds, computed in float64.

Run time: ``studies/residual/README.md`` gives the recorded run's (``results/default.json``). Everything runs on
one thread (``studies.threads``), each random stack is built once for the settings that share its norm placement,
and the prompts run as one batch.
"""

from __future__ import annotations

from dataclasses import asdict

import torch

from interp import HookedTransformer, TransformerConfig
from interp.registry import study_parser
from interp.study import StudyInputError, start
from studies.residual.config import ResidualConfig
from studies.residual.report import SUBTITLE, TITLE, build_report
from studies.residual.stacks import gradient_table, stream_sum_error
from studies.residual.trained import SENTENCES, lens_and_attribution, write_norms

DESCRIPTION = (
    "The residual stream as a highway: write norms, logit lens, attribution, gradient through depth."
)


def main(argv: list[str] | None = None) -> int:
    """Run the study: ``interp study residual [--model NAME] [--out DIR] [--seed N] [--quiet]``."""
    parser = study_parser("residual", DESCRIPTION)
    run = start(parser, argv)
    cfg = ResidualConfig()
    model = run.load(run.model) if run.model else None
    if model is not None and model.unembed is None:
        raise StudyInputError(
            f"--model {run.model} has no unembedding, so the logit lens and logit attribution cannot run on "
            "it; pass a model with a language-model head (such as smollm2-135m), or --model '' for none"
        )
    grads = gradient_table(cfg, run.args.seed, quiet=run.args.quiet)
    tiny = HookedTransformer(
        TransformerConfig(n_layers=4, d_model=32, n_heads=4, d_vocab=50, n_ctx=8, seed=run.args.seed)
    )
    sum_error = stream_sum_error(
        tiny, torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))
    )
    trained = None
    if model is not None:
        with run.step(f"{run.model}: logit lens, attribution and write norms"):
            lens, dla, tops = lens_and_attribution(model, SENTENCES)
            trained = {"norms": write_norms(model, SENTENCES), "lens": lens, "dla": dla, "tops": tops}
    report = run.report(TITLE, subtitle=SUBTITLE, config=asdict(cfg), model=run.model if trained else None)
    skipped = next(iter(run.skipped.values()), None)
    with run.step("figures and the report"):
        build_report(report, cfg, run.model, grads, sum_error, trained, skipped)
    return run.finish(report)
