"""Steering pronoun agreement: does adding a she-minus-he direction to the stream flip the pronoun a model
predicts, at which layers, at what cost to fluency, and best where patching found the agreement signal?

Hypothesis. On the agreement twins ("Emma is coming to the party tonight, isn't" / "Jack is ..."), the
difference between the stream of the feminine and the masculine twin at the prediction position, averaged
over pairs, is a direction that carries the pronoun's gender (and, for "the boys" / "the boy", its number).
Added to a held-out prompt's stream at that position it should move the prediction toward the other pronoun,
far more than a random direction of the same norm, with little change to the next-token distribution where
no pronoun is due. Patching located the agreement signal in SmolLM2-135M in heads L25H2 and L26H2, which
write into the streams entering blocks 26 and 27; if the direction is what those heads write, steering
should work from there on and not before them.

Metric. Directions: the mean difference at the last prompt token of ``blocks.L.hook_resid_pre`` over the
twin pairs of half the schemas (``split_by_schema``, seed 0), she-type minus he-type (``gender``) and plural
minus singular (``number``). On the other half, each item is steered toward the pronoun that does not agree
(``+scale`` times the direction for a he-type answer, ``-scale`` for a she-type one), at its last token only,
at scales in units of the direction itself (1 moves a prompt by the full mean difference): the fraction of
the items the unsteered model gets right whose preference flips, and the mean shift of
the logit difference toward the other pronoun (95% bootstrap intervals over schemas). Control: for each layer,
random Gaussian directions rescaled to the direction's norm, steered the same way. The direction's norm grows
with depth (the twins differ little early on), so in its own units an early layer's push is tiny by
construction; the same profile is therefore measured in units of the stream's norm at that layer too
(``--stream-scales``: multiples of the mean norm of the stream at the last prompt token of the build twins),
the direction and its random controls rescaled to it. At each kind, layer and scale the direction's shift is
compared with its random controls' (paired by item, sign flips over schemas), and Holm's correction runs over
every comparison of one unit (78 at the default settings in the direction's units). Before any steering, the
unsteered model's switch sensitivity on the held-out pairs (``studies.data.switch``: the she - he preference in
one twin minus the other's, tested by sign flips over pairs) and its bias are reported. Fluency: the KL divergence
(nats) from the unsteered next-token distribution after 16 neutral prompts (no person in them) under the same
intervention, and the perplexity, under the unsteered model, of greedy continuations generated with the
direction added at the last prompt token and every generated token (``positions=[-1, "new"]``), against
unsteered and random-direction continuations.

Run time: see ``studies/steering/README.md`` (measured) and each report's manifest (``wall_time_s``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from interp.analysis import SteeringVector
from interp.load import PACKAGED_MODELS
from interp.registry import study_parser
from interp.study import StudyRun, start
from studies.data.load import data_path, load_items, split_by_schema
from studies.steering import measure
from studies.steering.texts import CONTINUATIONS, NEUTRAL
from studies.threads import single_thread

DESCRIPTION = "Steering vectors for pronoun agreement: flips, shifts and fluency per layer, against random."
HOOK = "hook_resid_pre"


@dataclass(frozen=True)
class SteeringConfig:
    """The study's settings (recorded in the manifest)."""

    model: str = "smollm2-135m"
    data: str = "agreement"
    layers: tuple[int, ...] | None = None  # None: every third layer, the last, and around the focus layers
    focus: tuple[int, ...] = (25, 26)
    scales: tuple[float, ...] = (1.0, 2.0, 4.0)
    compare_scale: float = 2.0
    stream_scales: tuple[float, ...] = (0.05, 0.1, 0.2)
    n_random: int = 1
    new_tokens: int = 16
    n_continuations: int = 4
    batch_size: int = 256
    n_boot: int = 1000
    seed: int = 0


@dataclass
class SteeringResult:
    """Everything the report shows."""

    config: SteeringConfig
    layers: tuple[int, ...]
    focus: tuple[int, ...]
    kinds: list[str]
    directions: dict[str, dict[int, SteeringVector]]
    flips: pd.DataFrame
    flip_summary: pd.DataFrame
    fluency: pd.DataFrame
    fluency_summary: pd.DataFrame
    continuations: pd.DataFrame
    best: dict[str, int]
    counts: dict[str, dict[str, int]]
    timings: dict[str, float] = field(default_factory=dict)
    switch: dict = field(
        default_factory=dict
    )  # kind -> the unsteered model's SwitchSummary on held-out pairs
    norms: dict = field(default_factory=dict)  # kind -> {layer: mean stream norm at the last token}
    stream_flips: pd.DataFrame | None = None
    stream_summary: pd.DataFrame | None = None
    comparisons: pd.DataFrame | None = None  # direction against random, per units, kind, layer and scale
    corrections: dict = field(default_factory=dict)  # units -> Holm's Correction over its comparisons


def default_layers(n_layers: int, focus: Sequence[int]) -> tuple[int, ...]:
    """Every third layer, the last one, and each focus layer with its neighbours."""
    chosen = set(range(0, n_layers, 3)) | {n_layers - 1}
    chosen |= {layer + d for layer in focus for d in (-1, 0, 1)}
    return tuple(sorted(layer for layer in chosen if 0 <= layer < n_layers))


def parse(argv: Sequence[str] | None) -> tuple[SteeringConfig, StudyRun]:
    parser = study_parser("steering", DESCRIPTION, model_required=True)
    parser.add_argument("--data", default="agreement", help="agreement items: 'agreement' or a JSONL path")
    parser.add_argument("--layers", default=None, help="comma-separated layers, or 'all' (default: a subset)")
    parser.add_argument("--focus", default="25,26", help="layers where patching found the signal ('' none)")
    parser.add_argument("--scales", default="1,2,4", help="comma-separated multiples of the direction")
    parser.add_argument("--compare-scale", type=float, default=2.0, help="the scale layers are compared at")
    parser.add_argument(
        "--stream-scales",
        default="0.05,0.1,0.2",
        help="comma-separated multiples of the stream's mean norm at each layer (the profile in stream units)",
    )
    parser.add_argument("--random", type=int, default=1, help="random directions per layer")
    parser.add_argument("--new-tokens", type=int, default=16, help="tokens per generated continuation")
    parser.add_argument("--continuations", type=int, default=4, help="held-out prompts to continue")
    parser.add_argument("--batch-size", type=int, default=256, help="rows per steered forward pass")
    run = start(parser, argv)
    args = run.args
    scales = _floats(parser, "--scales", args.scales)
    if not scales or any(s <= 0 for s in scales):
        parser.error(f"--scales {args.scales}: give positive multiples, e.g. 1,2,4")
    stream_scales = _floats(parser, "--stream-scales", args.stream_scales)
    if not stream_scales or any(s <= 0 for s in stream_scales):
        parser.error(f"--stream-scales {args.stream_scales}: give positive multiples, e.g. 0.05,0.1,0.2")
    if args.compare_scale not in scales:
        parser.error(f"--compare-scale {args.compare_scale} is not one of --scales {args.scales}")
    for flag, value in (("--random", args.random), ("--new-tokens", args.new_tokens)):
        if value < 1:
            parser.error(f"{flag} {value}: give at least 1")
    if args.batch_size < 1 or args.continuations < 0:
        parser.error("--batch-size must be at least 1 and --continuations at least 0")
    layers = None if args.layers in (None, "all") else tuple(_ints(parser, "--layers", args.layers))
    config = SteeringConfig(
        model=args.model,
        data=args.data,
        layers=layers,
        focus=tuple(_ints(parser, "--focus", args.focus)),
        scales=tuple(scales),
        compare_scale=args.compare_scale,
        stream_scales=tuple(stream_scales),
        n_random=args.random,
        new_tokens=args.new_tokens,
        n_continuations=args.continuations,
        batch_size=args.batch_size,
        seed=args.seed,
    )
    return config, run


def _floats(parser, flag: str, text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parser.error(f"{flag} {text!r}: give comma-separated numbers")


def _ints(parser, flag: str, text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parser.error(f"{flag} {text!r}: give comma-separated layer numbers")


def run_study(
    model,
    items: Sequence,
    config: SteeringConfig,
    *,
    all_layers: bool = False,
    neutral: Sequence[str] = NEUTRAL,
    prompts: Sequence[str] = CONTINUATIONS,
    progress: bool = False,
) -> SteeringResult:
    """Every measurement of the study on ``model`` and agreement ``items``."""
    n_layers = model.cfg.n_layers
    focus = tuple(layer for layer in config.focus if 0 <= layer < n_layers)
    if all_layers:
        layers = tuple(range(n_layers))
    elif config.layers is not None:
        layers = tuple(sorted(set(config.layers)))
        bad = [layer for layer in layers if not 0 <= layer < n_layers]
        if bad:
            raise ValueError(f"--layers {bad} outside this model's {n_layers} layers (0..{n_layers - 1})")
    else:
        layers = default_layers(n_layers, focus)
    build, test = split_by_schema(items, 0.5, config.seed)
    kinds = [k for k in measure.KINDS if measure.contrast_pairs(build, k) and measure.contrast_pairs(test, k)]
    if not kinds:
        raise ValueError("no she/he or they/he twin pairs on both sides of the split; the study needs some")
    timings: dict[str, float] = {}
    directions, flips, fluency, counts = {}, [], [], {}
    norms, stream_flips, switch = {}, [], {}
    for k, kind in enumerate(kinds):
        start = time.perf_counter()
        directions[kind] = measure.find_directions(model, build, kind, layers, HOOK, batch_size=16)
        controls = measure.random_controls(directions[kind], config.n_random, config.seed + 1 + k)
        norms[kind] = measure.stream_norms(model, build, kind, layers, HOOK, batch_size=16)
        timings[f"directions_{kind}"] = time.perf_counter() - start
        start = time.perf_counter()
        flips.append(
            measure.flip_sweep(
                model, test, kind, directions[kind], controls, config.scales, config.batch_size, progress
            )
        )
        switch[kind] = measure.unsteered_switch(flips[-1], test, kind, config.seed)
        timings[f"flips_{kind}"] = time.perf_counter() - start
        start = time.perf_counter()
        stream = measure.in_stream_units(directions[kind], norms[kind])
        stream_controls = measure.in_stream_units(controls, norms[kind])
        stream_flips.append(
            measure.flip_sweep(
                model, test, kind, stream, stream_controls, config.stream_scales, config.batch_size, progress
            )
        )
        timings[f"stream_flips_{kind}"] = time.perf_counter() - start
        start = time.perf_counter()
        fluency.append(
            measure.fluency_cost(
                model, neutral, kind, directions[kind], controls, config.scales, config.batch_size, progress
            )
        )
        timings[f"fluency_{kind}"] = time.perf_counter() - start
        counts[kind] = {
            "build_pairs": len(measure.contrast_pairs(build, kind)),
            "test_pairs": len(measure.contrast_pairs(test, kind)),
            "test_items": sum(measure.kind_of(item) == kind for item in test),
        }
    flip_frame = pd.concat(flips, ignore_index=True)
    flip_summary = measure.summarise_flips(flip_frame, config.n_boot, config.seed)
    stream_frame = pd.concat(stream_flips, ignore_index=True)
    stream_summary = measure.summarise_flips(stream_frame, config.n_boot, config.seed)
    start = time.perf_counter()
    compared, corrections = [], {}
    for units, frame in (("direction", flip_frame), ("stream", stream_frame)):
        table, corrections[units] = measure.compare_to_random(frame, units, config.seed)
        compared.append(table)
    timings["comparisons"] = time.perf_counter() - start
    fluency_frame = pd.concat(fluency, ignore_index=True)
    fluency_summary = measure.summarise_fluency(fluency_frame, config.n_boot, config.seed)
    best = {kind: best_layer(flip_summary, kind, config.compare_scale) for kind in kinds}
    start = time.perf_counter()
    generated = _continuations(model, test, kinds, directions, best, focus, config, prompts)
    timings["continuations"] = time.perf_counter() - start
    return SteeringResult(
        config, layers, focus, kinds, directions, flip_frame, flip_summary, fluency_frame, fluency_summary,
        generated, best, counts, timings, switch, norms, stream_frame, stream_summary,
        pd.concat(compared, ignore_index=True), corrections,
    )  # fmt: skip


def best_layer(summary: pd.DataFrame, kind: str, scale: float) -> int:
    """The layer whose direction flips the most correct items at ``scale`` (ties: the larger shift)."""
    rows = summary[(summary.kind == kind) & (summary.control == "direction") & (summary.scale == scale)]
    rows = rows.sort_values(["flip", "shift", "layer"], ascending=[False, False, True])
    return int(rows.iloc[0].layer)


def _continuations(model, test, kinds, directions, best, focus, config, prompts) -> pd.DataFrame:
    """Greedy continuations, unsteered and steered with the first kind's direction at its best layer (and at
    the first focus layer), against a random direction of equal norm."""
    kind = kinds[0]
    pushed = [item.prompt for item in test if measure.kind_of(item) == kind and item.answer == 1]
    chosen = list(prompts) + pushed[: config.n_continuations]
    if not chosen:
        return pd.DataFrame(columns=["condition", "prompt", "text", "n_tokens", "perplexity"])
    scale, label = config.compare_scale, measure.KINDS[kind]
    where = [-1, "new"]
    layer = best[kind]
    vec = directions[kind][layer]
    rand = measure.random_controls({layer: vec}, 1, config.seed + 101)[layer, 0]
    conditions = {
        "unsteered": [],
        f"{label} at L{layer}, ×{scale:g}": [vec.hook(scale, where)],
        f"random at L{layer}, ×{scale:g}": [rand.hook(scale, where)],
    }
    for f in focus:
        if f != layer and f in directions[kind]:
            conditions[f"{label} at L{f}, ×{scale:g}"] = [directions[kind][f].hook(scale, where)]
            break
    return measure.continuations(model, chosen, conditions, config.new_tokens)


def model_path(name: str) -> Path | None:
    if name in PACKAGED_MODELS:
        return PACKAGED_MODELS[name].location()
    return Path(name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and write the report; returns 0 (the exit status)."""
    from studies.steering.report import write_report

    config, run = parse(argv)
    clock = time.perf_counter()
    items = load_items(config.data)  # read and checked before the model loads
    torch.manual_seed(config.seed)
    with single_thread():
        model = run.load(config.model)
        result = run_study(
            model, items, config, all_layers=run.args.layers == "all", progress=not run.args.quiet
        )
    report = run.report(
        "Steering pronoun agreement",
        subtitle="Does a she-minus-he direction flip the predicted pronoun, where, and at what cost?",
        config=config,
        model=config.model,
        model_path=model_path(config.model),
        data_paths=[data_path(config.data)],
        device=str(model.device),
        dtype=model.dtype,
    )
    with run.step("figures and the report"):
        write_report(report, result, time.perf_counter() - clock)
    return 0
