"""Pronoun coreference in trained models: does the model resolve "it", and which heads carry the referent?

Hypothesis. In "The animal didn't cross the street because it was too tired" the pronoun refers to the
animal; with "wide" it refers to the street. A language model that resolves such pronouns should (1) move its
preference toward the right candidate when the switch word changes it (switch sensitivity), whatever it prefers
in both twins (its bias), and so prefer the right candidate in both twins when the bias is small;
(2) have heads whose attention, from a position that can see the switch word,
goes to the referent; (3) carry the twin difference causally through those heads and positions; and (4)
hold the referent linearly decodable in its residual stream. A causal model cannot do any of this *at the
pronoun* when the switch word comes after it: its activations there are identical across twins.

Metric. Primary, per data set: the switch sensitivity (``studies.data.switch``), per comparable twin pair the
preference for the first candidate (or pronoun) in one twin minus that in the other, signed toward the expected
answer, tested by sign flips over pairs with its interval; the bias (the mean preference over both twins)
apart; both twins right (pair accuracy; chance 0.25) after them. Resolution (``winograd``): accuracy of full,
partial (Trinh and Le 2018) and question-prompt scoring,
with 95% bootstrap intervals over schemas (twins together),
chance (0.5) and rules that ignore the switch (first candidate, nearest candidate: 0.5 accuracy, 0 pair
accuracy by construction). Agreement (``agreement``): the logit difference between the agreeing and the other
pronoun at the next-token position, accuracy overall and on two-person prompts against most-recent-name and
first-name baselines. Attention: per-head antecedent accuracy (more mass on the referent, by weight and by
Kobayashi norm) from the pronoun, the switch word, the full stop and the final position; heads selected on
half the schemas and tested on the other half (a sign-flip test against 0.5 over held-out schemas, twins as one
unit, Holm-corrected over every head and measure tested). Causal: normalised recovery of the metric's logit
difference when patching the residual stream (by layer and position role) and each head's output ``hook_z``
from one twin into the other, pooled over pairs; attribution patching for the sweep, exact patching for the
top slots. Probes: per-layer logistic regression for the referent, split by twin pair, with a shuffled-label
control.

Data. The shipped sets (``winograd``, ``agreement``) or any file of a supported format (``--data PATH``,
repeatable; the study's own JSONL with only the defining fields, WinoGrande, SuperGLUE WSC, the WSC XML,
``winograd_wsc`` JSONL, DPR). Every file is read and checked before the model is loaded; items without a
usable twin still get behaviour scoring, attention and probes, and the report says how many items each
analysis used and why it left the others out.

Run time (``interp study coreference``, both data sets, 522 items, 16 twin pairs patched per set, probes at
two positions per set): see ``studies/coreference/README.md`` for the measured time; the report's manifest
records each run's (``wall_time_s``). Under ``torchrun`` the forward passes and the patching are shared out
among ranks and the report is the same, number for number.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from interp import distributed
from interp.load import PACKAGED_MODELS
from interp.registry import study_parser
from interp.study import StudyRun, start, step
from studies.coreference.held_out import held_out_heads, probes_for
from studies.coreference.measure import (
    AGREEMENT_QUERIES,
    RESOLUTION_QUERIES,
    Measured,
    measure_agreement,
    measure_resolution,
)
from studies.coreference.plan import Planned, plan
from studies.data.forward import bos_prepended, has_lm_head
from studies.data.load import FORMATS, SHIPPED, DataSet
from studies.data.twins import Pairing

DESCRIPTION = "Pronoun coreference: behaviour, attention, patching, probes, on Winograd-style twins."


@dataclass(frozen=True)
class CoreferenceConfig:
    """The study's settings (recorded in the manifest)."""

    model: str = "smollm2-135m"
    data: tuple[str, ...] = ("winograd", "agreement")
    format: str | None = None
    limit: int | None = None
    batch_size: int = 16
    patch_pairs: int = 16
    top_k: int = 5
    probe_steps: int = 100
    probes: str = "all"
    prepend_bos: bool | None = None
    seed: int = 0


@dataclass
class DataResult:
    """Everything one data set gave, for the report."""

    name: str
    kind: str
    items: list
    measured: list[Measured]
    records: list[dict]
    queries: tuple[str, ...]
    analysis: dict
    data: DataSet | None = None
    pairing: Pairing | None = None


def parse(argv: Sequence[str] | None) -> tuple[CoreferenceConfig, StudyRun]:
    parser = study_parser("coreference", DESCRIPTION, model_required=True)
    parser.add_argument(
        "--data",
        action="append",
        help="winograd, agreement or a data file of any supported format, repeatable (default: both shipped sets)",
    )
    parser.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default=None,
        help="read every --data file as this format (default: told from the fields)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="use the first N items, whole schemas kept (default: all)"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="prompts per forward pass")
    parser.add_argument(
        "--patch-pairs",
        type=int,
        default=16,
        help="twin pairs to patch per data set (8 halves the patching time)",
    )
    parser.add_argument("--top-k", type=int, default=5, help="slots re-measured by exact patching")
    parser.add_argument(
        "--probes",
        choices=("all", "final", "none"),
        default="all",
        help="probe positions: the referent's and the prediction position (all), the latter only, or none",
    )
    parser.add_argument(
        "--prepend-bos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="start every scored text with BOS, or not (default: when the vocabulary has one)",
    )
    run = start(parser, argv)
    args = run.args
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit {args.limit}: give at least 1 item")
    data = tuple(args.data or ("winograd", "agreement"))
    if args.format is not None and all(name in SHIPPED for name in data):
        parser.error(
            f"--format {args.format}: it applies to data files; {', '.join(data)} are read as shipped"
        )
    config = CoreferenceConfig(
        model=args.model,
        data=data,
        format=args.format,
        limit=args.limit,
        batch_size=args.batch_size,
        patch_pairs=args.patch_pairs,
        top_k=args.top_k,
        probes=args.probes,
        prepend_bos=args.prepend_bos,
        seed=args.seed,
    )
    return config, run


def model_path(name: str) -> Path | None:
    if name in PACKAGED_MODELS:
        return PACKAGED_MODELS[name].location()
    return Path(name)


def check_scoring(model, config: CoreferenceConfig) -> None:
    """Refuse a BOS choice the model cannot take, before any forward pass."""
    if config.prepend_bos is None:
        return
    flag = "--prepend-bos" if config.prepend_bos else "--no-prepend-bos"
    if not has_lm_head(model):
        raise ValueError(
            f"{flag}: {config.model} has no language-model head; the flag sets how scored texts start"
        )
    if config.prepend_bos and model.tokenizer.bos_id is None:
        raise ValueError(
            f"--prepend-bos: the tokenizer of {config.model} has no BOS token; run without the flag"
        )


def chunks(items: list, batch_size: int) -> list[list[int]]:
    """Item indices grouped into the batches they are run in: sorted by text length (less padding), then
    cut into ``batch_size`` pieces. The plan depends only on the items, so it is the same for any number of
    ranks."""
    length = [len(x.sentence if hasattr(x, "sentence") else x.prompt) for x in items]
    order = sorted(range(len(items)), key=lambda i: (length[i], i))
    return [order[s : s + batch_size] for s in range(0, len(order), batch_size)]


def measure(model, items: list, config: CoreferenceConfig, progress: bool) -> list[Measured] | None:
    """The per-item map, sharded across ranks by whole batches (so every batch is the one a single process
    runs, and the numbers agree exactly); rank 0 gets every record in item order, others ``None``."""
    plan_ = chunks(items, config.batch_size)
    span = distributed.shard_range(len(plan_))
    local = [i for chunk in plan_[span.start : span.stop] for i in chunk]
    fn = measure_agreement if items[0].kind == "agreement" else measure_resolution
    measured = fn(
        model,
        [items[i] for i in local],
        batch_size=config.batch_size,
        progress=progress,
        bos=config.prepend_bos,
    )
    for i, m in zip(local, measured, strict=True):
        m.positions["item"] = i
    parts = distributed.gather_objects(measured)
    if parts is None:
        return None
    return sorted((m for part in parts for m in part), key=lambda m: m.positions["item"])


def analyse(
    model,
    planned: Planned,
    measured: list[Measured] | None,
    config: CoreferenceConfig,
    progress: bool = False,
):
    """The reductions over one data set's records; every rank takes part in the patching, rank 0 gets the
    :class:`DataResult` (others ``None``). With ``progress``, each long step says when it starts and ends."""
    from studies.coreference import attention, behaviour, causal
    from studies.coreference.coverage import coverage_table
    from studies.coreference.sensitivity import switch_summaries
    from studies.data import pairs as pairs_module

    items, pairing = planned.data.items, planned.pairing
    kind = items[0].kind
    roles = pairs_module.ROLES_RESOLUTION if kind == "resolution" else pairs_module.ROLES_AGREEMENT
    comparable = [(items[a], items[b]) for a, b in pairing.comparable]
    label = planned.label
    pairs, kept = pairs_module.make_pairs(model, comparable, config.patch_pairs, config.prepend_bos)
    with step(
        f"{label}: patching {len(pairs)} twin pairs", study="coreference", enabled=progress and bool(pairs)
    ):
        swept = causal.sweep(model, pairs, roles, 3, config.top_k) if pairs else None
    if measured is None:
        return None
    records = [m.record for m in measured]
    lm = has_lm_head(model)
    queries = (
        (RESOLUTION_QUERIES if lm else RESOLUTION_QUERIES[:3]) if kind == "resolution" else AGREEMENT_QUERIES
    )
    out: dict = {}
    if lm:
        table = behaviour.resolution_table if kind == "resolution" else behaviour.agreement_table
        out["behaviour"] = table(records, pairing.pairs)
        out["behaviour"]["bos_prepended"] = bos_prepended(model, config.prepend_bos)
        out["switch"] = switch_summaries(records, pairing.comparable, kind, config.seed)
    targets = [r["answer"] for r in records] if kind == "resolution" else [0] * len(records)
    right, margin = attention.picks(measured, targets)
    out["head_accuracy"] = attention.head_accuracy(right)
    with step(f"{label}: testing heads on held-out schemas", study="coreference", enabled=progress):
        out["heads"], out["heads_skipped"] = held_out_heads(
            items, right, margin, queries, config, pairing.comparable if kind == "resolution" else ()
        )  # agreement twins share the antecedent's position: no referent to switch between
    if kind == "resolution":
        out["twins"] = {
            q: attention.twin_difference(measured, pairing.comparable, pairing.aligned, qi, q)
            for qi, q in enumerate(queries)
        }
    out["pairs_kept"], out["pairs_total"], out["pairs_used"] = kept, len(comparable), len(pairs)
    if swept is not None:
        out.update(swept)
    out["roles"] = roles
    with step(f"{label}: training probes", study="coreference", enabled=progress):
        out["probes"], out["probes_skipped"] = probes_for(measured, records, kind, lm, config)
    out["coverage"] = coverage_table(planned, records, out, lm)
    return DataResult(planned.label, kind, items, measured, records, queries, out, planned.data, pairing)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and write the report; returns 0 (the exit status)."""
    config, run = parse(argv)
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    with distributed.session():
        planned = plan(config.data, config.format, config.limit)  # every file checked before the model loads
        if distributed.rank() == 0:
            for p in planned:
                p.data.warn(p.label)
        model = run.load(config.model)
        check_scoring(model, config)
        progress = not run.args.quiet and distributed.rank() == 0
        results = []
        for p in planned:
            measured = measure(model, p.data.items, config, progress)
            result = analyse(model, p, measured, config, progress)
            if result is not None:
                results.append(result)
        if distributed.rank() == 0:
            from studies.coreference.picture import seed_picture
            from studies.coreference.report import write_report

            heads = top_heads(results)
            with run.step("the seed's picture"):
                picture = seed_picture(model, heads, config.prepend_bos)
            report = run.report(
                "Pronoun coreference",
                subtitle="Does the model resolve the pronoun, and which heads carry the referent?",
                config=config,
                model=config.model,
                model_path=model_path(config.model),
                data_paths=[p.data.path for p in planned],
                device=str(model.device),
                dtype=model.dtype,
            )
            with run.step("figures and the report"):
                write_report(report, model, config, results, picture, time.perf_counter() - start)
    return 0


def top_heads(results: Sequence[DataResult], n: int = 2) -> list[tuple[int, int]]:
    """Heads to draw in the seed picture: the strongest verified ``hook_z`` patches on the resolution set,
    else the best held-out attention heads."""
    for result in results:
        if result.kind == "resolution" and "z_exact" in result.analysis and len(result.analysis["z_exact"]):
            frame = result.analysis["z_exact"]
            return [(int(r.layer), int(r.head)) for r in frame.head(n).itertuples()]
    for result in results:
        frame = result.analysis["heads"]
        if len(frame):
            return [
                (int(r.layer), int(r.head))
                for r in frame.drop_duplicates(["layer", "head"]).head(n).itertuples()
            ]
    return [(0, 0)]
