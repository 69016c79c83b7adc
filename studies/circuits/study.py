"""Which edges of a model carry pronoun agreement, and how much of the behaviour does that subgraph reproduce?

Hypothesis. The coreference study found two heads of SmolLM2-135M (L25H2, L26H2) whose outputs, patched
between agreement twins, carry most of the pronoun logit difference. If agreement runs through a small set of
paths, a circuit of a few hundred of the model's 70,651 edges, chosen by edge attribution on some twins, should
reproduce the model's preference on other twins (faithfulness >= 0.85 with at most 300 edges, against 0.84
with 89 edges for EAP-IG on GPT-2 small's gendered-pronoun task), should contain those heads, and should have
the shape reported for GPT-2 small: the name read early, heads that attend to the name, MLPs, then late heads
and MLPs into the logits.

Metric. Pairs are agreement twins in both directions (clean: one twin; corrupted: the other); the metric is
the logit difference between the clean twin's pronoun and the other twin's at the next-token position.
Faithfulness ``(m(C) - m(corrupt)) / (m(full) - m(corrupt))`` with every edge outside circuit ``C`` patched from
the corrupted input, on held-out pairs from other schemas. Edges are scored by EAP and EAP-IG (5 steps); their
scores are checked against exact edge patching on a uniform random sample of edges and on the strongest ones
(Pearson and Spearman, against the published 0.88-0.98 for EAP-IG). Curves of faithfulness against size for
both methods, ranked by ``|score|`` and by signed score, with MIB's CPR and CMD; the smallest top-n circuit
reaching 0.8 on the scoring pairs is drawn and tested on held-out pairs, its heads compared with the
coreference heads, its behaviour split by one- and two-person prompts, and its MLPs located by position.

Run time: see ``studies/circuits/README.md`` for measured times; the manifest records each run's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from interp import distributed
from interp.circuits import Graph
from interp.load import PACKAGED_MODELS
from interp.registry import study_parser
from interp.study import StudyRun, start, step
from studies.circuits import analysis, anatomy
from studies.circuits.data import check_items, sample, split_pairs
from studies.data.load import data_path, load_items

DESCRIPTION = "Circuit discovery on agreement twins: EAP and EAP-IG, exact edge patching, faithfulness."


@dataclass(frozen=True)
class CircuitsConfig:
    """The study's settings (recorded in the manifest)."""

    model: str = "smollm2-135m"
    data: str = "agreement"
    method: str = "eap-ig"
    pairs: int | None = 24
    test_pairs: int | None = 24
    steps: int = 5
    batch_size: int = 16
    exact_pairs: int = 8
    exact_edges: int = 32
    exact_top: int = 8
    threshold: float = 0.8
    sizes: tuple[int, ...] = (25, 50, 100, 200, 300)
    seed: int = 0


def model_path(name: str) -> Path | None:
    """The packaged model's file, or the folder or file given (hashed into the manifest)."""
    return PACKAGED_MODELS[name].location() if name in PACKAGED_MODELS else Path(name)


def _count(text: str) -> int | None:
    value = int(text)
    if value < 0:
        raise ValueError(f"{value} is negative")
    return None if value == 0 else value


def _sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(int(s) for s in text.split(",") if s.strip())
    if any(s < 1 for s in sizes):
        raise ValueError(f"sizes must be positive edge counts, got {text!r}")
    return sizes


def parse(argv: Sequence[str] | None) -> tuple[CircuitsConfig, StudyRun, list]:
    parser = study_parser("circuits", DESCRIPTION, model_required=True)
    parser.add_argument("--data", default="agreement", help="agreement, or a JSONL file of agreement twins")
    parser.add_argument(
        "--method", choices=analysis.METHODS, default="eap-ig", help="the method whose circuit is drawn"
    )
    parser.add_argument(
        "--pairs", type=_count, default=24, help="scoring pairs (two per twin pair; 0: all, 76 here)"
    )
    parser.add_argument("--test-pairs", type=_count, default=24, help="held-out pairs (0: all)")
    parser.add_argument("--steps", type=int, default=5, help="EAP-IG interpolation points")
    parser.add_argument("--batch-size", type=int, default=16, help="pairs per forward pass")
    parser.add_argument(
        "--exact-pairs", type=int, default=8, help="scoring pairs that exact edge patching uses"
    )
    parser.add_argument("--exact-edges", type=int, default=32, help="uniformly sampled edges patched exactly")
    parser.add_argument("--exact-top", type=int, default=8, help="strongest edges per method patched exactly")
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=(25, 50, 100, 200, 300),
        help="small circuit sizes evaluated besides MIB's ten fractions of the graph (comma-separated)",
    )
    parser.add_argument(
        "--threshold", type=float, default=0.8, help="faithfulness the drawn circuit must reach"
    )
    run = start(parser, argv)
    args = run.args
    for name in ("steps", "batch_size", "exact_pairs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: give at least 1")
    if args.exact_edges < 0 or args.exact_top < 0 or args.exact_edges + args.exact_top < 3:
        parser.error("--exact-edges and --exact-top: give at least 3 edges in all, to correlate")
    if not 0 < args.threshold <= 1:
        parser.error(f"--threshold {args.threshold}: give a faithfulness in (0, 1]")
    config = CircuitsConfig(
        model=args.model,
        data=args.data,
        method=args.method,
        pairs=args.pairs,
        test_pairs=args.test_pairs,
        steps=args.steps,
        batch_size=args.batch_size,
        exact_pairs=args.exact_pairs,
        exact_edges=args.exact_edges,
        exact_top=args.exact_top,
        threshold=args.threshold,
        sizes=args.sizes,
        seed=args.seed,
    )
    items = load_items(args.data)  # read and checked before any model is loaded
    check_items(items)
    return config, run, items


class Timer:
    """Wall seconds per stage, for the report's run section (kept out of results.json)."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.stages[name] = now - self._last
        self._last = now


def measure(model, config: CircuitsConfig, progress: bool, items: list | None = None) -> dict:
    """Every measurement of the study (on every rank; see :mod:`studies.circuits.analysis`)."""
    timer = Timer()
    graph = Graph.from_model(model)  # refuses a family the graph cannot express, before any work
    items = load_items(config.data) if items is None else items
    scoring_all, test_all, dropped = split_pairs(model, items, 0.5, config.seed)
    scoring = sample(scoring_all, config.pairs, config.seed)
    test = sample(test_all, config.test_pairs, config.seed)
    exact_pairs = sample(scoring, config.exact_pairs, config.seed + 1)
    exact_rows = [i for i, ids in enumerate(scoring.ids) if ids in set(exact_pairs.ids)]
    timer.lap("pairs")
    scored = analysis.score(model, scoring, exact_rows, config.steps, config.batch_size, progress)
    timer.lap("scores")
    sizes = analysis.sizes_for(graph, config.sizes)
    mib = analysis.sizes_for(graph, ())
    kw = dict(batch_size=config.batch_size, progress=progress)
    curves = [
        analysis.curve(model, scored.all[m], test, sizes, absolute=True, split="test", **kw)
        for m in analysis.METHODS
    ]
    curves += [
        analysis.curve(model, scored.all[m], test, mib, absolute=False, split="test", **kw)
        for m in analysis.METHODS
    ]
    timer.lap("curves")
    chosen = analysis.smallest(model, scored.all[config.method], scoring, test, sizes, config.threshold, **kw)
    timer.lap("smallest circuit")
    table, correlations = analysis.exact_check(
        model, exact_pairs, scored.exact_subset, config.exact_edges, config.exact_top, config.seed, **kw
    )
    timer.lap("exact patching")
    with step("the circuit's anatomy: per-pair metrics, attention, MLP positions", study="circuits",
              enabled=progress):  # fmt: skip
        per_pair = anatomy.per_pair_metrics(model, chosen.circuit, test, config.batch_size)
        reference = [
            h for h in anatomy.COREFERENCE_HEADS if h[0] < model.cfg.n_layers and h[1] < model.cfg.n_heads
        ]
        layers = sorted({layer for layer, _ in chosen.circuit.heads} | {layer for layer, _ in reference})
        attention = anatomy.name_attention(model, test, layers, config.batch_size)
        mlp_layers = [int(n[1:].split(".")[0]) for n in chosen.circuit.nodes if n.endswith(".MLP")]
        mlps = anatomy.mlp_positions(model, test, mlp_layers)
    timer.lap("circuit analysis")
    curve_frame = pd.concat([*curves, chosen.train_points], ignore_index=True)
    return {
        "graph": graph,
        "pairs": {
            "scoring": scoring,
            "test": test,
            "exact": exact_pairs,
            "dropped": dropped,
            "available": (len(scoring_all), len(test_all)),
        },  # fmt: skip
        "scores": scored,
        "curves": curve_frame,
        "areas": analysis.areas(curve_frame, graph),
        "chosen": chosen,
        "exact": table,
        "correlations": correlations,
        "per_pair": per_pair,
        "people": anatomy.by_people(per_pair, config.seed),
        "switch": anatomy.switch_by_people(per_pair, config.seed),
        "heads": anatomy.heads_table(chosen.circuit, scored.all[config.method], attention, tuple(reference)),
        "attention": attention,
        "mlps": mlps,
        "timer": timer.stages,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and write the report; returns 0 (the exit status)."""
    config, run, items = parse(argv)
    clock = time.perf_counter()
    torch.manual_seed(config.seed)
    with distributed.session():
        model = run.load(config.model)
        progress = not run.args.quiet and distributed.rank() == 0
        results = measure(model, config, progress, items)
        if distributed.rank() == 0:
            from studies.circuits.report import write_report

            report = run.report(
                "Circuits for pronoun agreement",
                subtitle="Which edges carry the agreeing pronoun, and how faithful is that subgraph alone?",
                config=config,
                model=config.model,
                model_path=model_path(config.model),
                data_paths=[data_path(config.data)],
                device=str(model.device),
                dtype=model.dtype,
            )
            with run.step("figures and the report"):
                write_report(report, model, config, results, time.perf_counter() - clock)
    return 0
