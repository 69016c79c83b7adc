"""Sparse features of pronoun agreement: does a dictionary trained on plain text find what carries "she" vs "he"?

Hypothesis. The coreference study's patching localises SmolLM2-135M's agreement signal: on the agreement twins
the twin difference reaches the final position's residual stream between layers 25 and 27, through heads L25H2
and L26H2 (the recovered fractions are in this study's README). A TopK sparse autoencoder trained on ordinary
text at the stream after layer 26 (``blocks.26.hook_resid_post`` = ``resid_pre`` of layer 27) should then have
a few features whose activation at the final position differs between the feminine and the masculine twin,
consistently on held-out pairs; ablating them should move the pronoun logit difference more than ablating
random features of the same density; and attribution to the features plus the SAE's error node should find
them, with exact patching confirming it. An early layer (after layer 3), before the antecedent's gender has
reached the final position, serves as a contrast.

Metrics. Dictionary quality on held-out text: L0, explained variance, MSE, cosine, CE loss recovered against
zero and mean ablation, KL and the dead fraction, as means over 4 held-out folds with bootstrap intervals.
Separation: per feature the feminine-minus-masculine difference at the final position; features ranked by its
selectivity (mean difference over the feature's RMS activation) on half the twin pairs (split by schema), tested
on the other half (mean difference with a bootstrap
interval, sign agreement with a Wilson interval). Causal: the change of the signed pronoun logit difference when
the top features are zeroed at the final position (error term kept), against 10 draws of random features of
matched density; attribution patching of the metric to every feature and the error node between twins, the
strongest features re-measured by exact patching. Intervals are 95%.

Run time: the default run took 267 s of CPU on one thread (``studies/features/README.md`` has the details and
the results); the flags scale it up.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from interp import distributed
from interp.load import PACKAGED_MODELS
from interp.registry import study_parser
from interp.study import StudyRun, start

DESCRIPTION = "Sparse autoencoder features of pronoun agreement on SmolLM2, trained on public-domain text."


@dataclass(frozen=True)
class FeaturesConfig:
    """The study's settings (recorded in the manifest)."""

    model: str = "smollm2-135m"
    data: str | None = None
    layers: tuple[int, ...] = (3, 26)
    texts: int = 250
    context: int = 64
    d_sae: int = 1024
    k: int = 32
    epochs: int = 8
    train_batch_size: int = 512
    pairs: int = 32
    top: int = 8
    random_draws: int = 10
    twins: str = "agreement"
    seed: int = 0


def parse(argv: Sequence[str] | None) -> tuple[FeaturesConfig, StudyRun]:
    p = study_parser("features", DESCRIPTION, model_required=True)
    p.add_argument("--data", default=None, help="corpus file (text, JSONL 'text', parquet); default: the KJV")
    p.add_argument("--layers", default="3,26", help="blocks whose resid_post get an SAE, comma separated")
    p.add_argument("--texts", type=int, default=250, help="corpus passages to use (about 90 tokens each)")
    p.add_argument("--context", type=int, default=64, help="tokens per training window")
    p.add_argument("--d-sae", type=int, default=1024, help="latents of each SAE")
    p.add_argument("--k", type=int, default=32, help="active latents per token (TopK)")
    p.add_argument("--epochs", type=int, default=8, help="passes over the cached activations")
    p.add_argument("--train-batch-size", type=int, default=512, help="rows per SAE training step")
    p.add_argument("--pairs", type=int, default=32, help="agreement twin pairs to analyse")
    p.add_argument("--top", type=int, default=8, help="features tested causally and shown")
    p.add_argument(
        "--random-draws",
        type=int,
        default=10,
        help="sets of random features of matched density, the baseline",
    )
    p.add_argument("--twins", default="agreement", help="agreement twins JSONL (default: the shipped set)")
    p.add_argument("--work", default=None, help="folder for the activation store (default: a temporary one)")
    run = start(p, argv)
    args = run.args
    try:
        layers = tuple(int(x) for x in args.layers.split(","))
    except ValueError:
        p.error(f"--layers {args.layers!r}: give comma-separated block numbers such as 3,26")
    if args.k > args.d_sae:
        p.error(f"--k {args.k} is larger than --d-sae {args.d_sae}")
    if args.pairs < 4:
        p.error(f"--pairs {args.pairs}: give at least 4 (half select features, half test them)")
    config = FeaturesConfig(
        model=args.model,
        data=args.data,
        layers=layers,
        texts=args.texts,
        context=args.context,
        d_sae=args.d_sae,
        k=args.k,
        epochs=args.epochs,
        train_batch_size=args.train_batch_size,
        pairs=args.pairs,
        top=args.top,
        random_draws=args.random_draws,
        twins=args.twins,
        seed=args.seed,
    )
    return config, run


def run_study(
    model, config: FeaturesConfig, corpus, work: Path, progress: bool, items: list | None = None
) -> dict:
    """Train, evaluate and probe one SAE per layer; returns everything the report needs.

    Args:
        items: agreement twins (default: the shipped agreement set).
    """
    from interp.store import cache_activations, windows

    bad = [layer for layer in config.layers if not 0 <= layer < model.cfg.n_layers]
    if bad:
        raise ValueError(f"--layers: block {bad[0]} does not exist; {config.model} has {model.cfg.n_layers}")
    hooks = [f"blocks.{layer}.hook_resid_post" for layer in config.layers]
    batches = windows(model, corpus.texts, config.context, 16)
    n_held = max(1, len(batches) // 20)
    train_batches, held = batches[:-n_held], batches[-n_held:]
    store = cache_activations(model, train_batches, hooks, work / "activations", progress=progress)
    pairs, select = _twin_pairs(model, config, items)
    out = {
        "hooks": hooks,
        "n_train_rows": len(store),
        "n_pairs": len(pairs),
        "n_select": int(select.sum()),
        "layers": [],
    }
    for layer, hook in zip(config.layers, hooks, strict=True):
        out["layers"].append(_layer(model, config, store, held, pairs, select, layer, hook, progress))
    return out


def _twin_pairs(model, config: FeaturesConfig, items: list | None) -> tuple[list, np.ndarray]:
    """The gendered twin pairs to measure on, and which of them select features (the rest test them)."""
    from studies.data.load import load_items, split_by_schema, twin_pairs
    from studies.data.pairs import make_pairs
    from studies.features import measure

    items = load_items(config.twins) if items is None else items
    by_id = {x.id: x for x in items}
    pairs, _ = make_pairs(model, twin_pairs(items), 10**6)
    pairs = measure.gender_pairs(pairs, by_id)[: config.pairs]
    first, _ = split_by_schema([by_id[i] for p, _ in pairs for i in p.ids], 0.5, config.seed)
    first_ids = {x.id for x in first}
    select = np.array([p.ids[0] in first_ids for p, _ in pairs])
    if select.all() or not select.any():
        select = np.arange(len(pairs)) % 2 == 0
    return pairs, select


def _layer(model, config: FeaturesConfig, store, held, pairs, select, layer: int, hook: str, progress: bool):
    """Train one SAE at ``hook`` and measure it: quality, separating features, ablations, attribution."""
    from interp.sae.feature_report import feature_stats, logit_effects
    from interp.sae.training import train
    from studies.features import measure

    clock = time.perf_counter()
    sae = train(
        store,
        hook_name=hook,
        d_sae=config.d_sae,
        k=config.k,
        batch_size=config.train_batch_size,
        tokens=config.epochs * len(store),
        seed=config.seed,
        min_position=1,
        progress=progress,
    )
    train_s = time.perf_counter() - clock
    sample = store.tensor(hook, slice(0, min(len(store), 20000)))
    density = measure.densities(sae, sample)
    result = {
        "layer": layer,
        "hook": hook,
        "train_seconds": train_s,
        "history": sae.cfg.metadata["training"]["history"],
        "quality": measure.quality(model, sae, held, 4, config.seed),
    }
    acts = measure.twin_activations(model, sae, pairs)
    separating = measure.separating_features(acts, select, config.top, config.seed)
    result["separating"] = separating
    test_pairs = [pair for pair, s in zip(pairs, select, strict=True) if not s]
    top = separating["feature"].tolist()
    random_sets = measure.matched_random(top, density, config.random_draws, config.seed)
    effects = measure.ablation_effects(model, sae, test_pairs, [top, *random_sets])
    result["ablation"] = _ablation_summary(effects, test_pairs, config.seed)
    result["attribution"], result["attribution_gap"] = measure.attribution_check(model, sae, test_pairs, 5)
    result["density_top"] = [float(density[f]) for f in top]
    result["contexts"] = feature_stats(model, sae, held, top[:6], k=6, window=10)
    result["logits"] = logit_effects(model, sae, top[:6], k=8)
    return result


def _ablation_summary(effects: np.ndarray, pairs: Sequence, seed: int) -> dict:
    """Effect of ablating the top features (column 0) against the random matched sets (the other columns)."""
    from studies.features.measure import bootstrap_ci

    top, random = effects[:, 0], effects[:, 1:]
    random_means = random.mean(0)  # one mean change per random draw
    lo, hi = bootstrap_ci(top, seed)
    r_lo, r_hi = bootstrap_ci(random.mean(1), seed + 1)
    beyond = float((np.abs(random_means) >= abs(top.mean())).mean()) if random.size else float("nan")
    return {
        "top_mean": float(top.mean()),
        "top_ci": (lo, hi),
        "random_mean": float(random.mean()) if random.size else float("nan"),
        "random_ci": (r_lo, r_hi),
        "random_draw_means": random_means.round(6).tolist(),
        "fraction_random_as_large": beyond,
        "per_pair_top": top.round(6).tolist(),
        "n_pairs": len(pairs),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and write the report; returns 0."""
    from studies.data.corpus import load_corpus
    from studies.data.load import data_path as coreference_data_path
    from studies.features.report import write_report

    config, run = parse(argv)
    clock = time.perf_counter()
    torch.manual_seed(config.seed)
    corpus = load_corpus(config.data, config.texts, config.seed)
    work = Path(run.args.work) if run.args.work else Path(tempfile.mkdtemp(prefix="interp-features-"))
    try:
        with distributed.session():
            if distributed.world_size() > 1:  # the pairs and trainings are few: one process is the fast way
                raise ValueError("the features study runs in one process; run it without torchrun")
            model = run.load(config.model)
            results = run_study(model, config, corpus, work, not run.args.quiet)
            model_path = (
                PACKAGED_MODELS[config.model].location()
                if config.model in PACKAGED_MODELS
                else Path(config.model)
            )
            report = run.report(
                "Sparse features of pronoun agreement",
                subtitle="Does a dictionary trained on plain text find what carries 'she' versus 'he'?",
                config=config,
                model=config.model,
                model_path=model_path,
                data_paths=[p for p in (corpus.path, coreference_data_path(config.twins)) if p is not None],
                device=str(model.device),
                dtype=model.dtype,
            )
            with run.step("figures and the report"):
                write_report(report, model, config, corpus, results, time.perf_counter() - clock)
    finally:
        if not run.args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0
