"""Does the seed's attention mechanism exist in a trained model? QK attribution on Winograd twins.

Hypothesis. The seed says that in "The animal didn't cross the street because it was too tired" attention
resolves "it": a query that has combined the pronoun with the adjective matches a key carrying the attributes
of the animal, and with "wide" the street. In a causal model the pronoun's own query cannot see the adjective,
so the first position where this can happen is the sentence's last token (the full stop). A head that does this
is sensitive to the switch word there: its preference (score to the first candidate minus score to the second)
moves toward the referent from one twin to the other. For a head whose preference has the right sign in both
twins, the hypothesis predicts that (1) a large share of the preference comes through query-side components that read
the switch word (earlier heads' writes carried from the adjective's position), and (2) removing the top
query-side components from the head's query input flips or shrinks the preference, while removing components
of matched size chosen at random does not.

Metric. Per head, primary: its switch sensitivity on the held-out pairs (``studies.data.switch``): per pair, its
preference for the first candidate in one twin minus that in the other, signed toward the expected referent
(score units; 0 is none), tested by sign flips over pairs with its interval, Holm-corrected over the analysed
heads; its bias (the mean preference over both twins) apart. Secondary: on how many held-out pairs it is right in
both twins (prefers each twin's own referent), against the 25% that random signs give, with a 95% bootstrap
interval over schemas and a one-sided exact
binomial test. Per head and twin where it is right: the preference's exact split into query component x key
component terms (:func:`interp.analysis.qk.difference.qk_key_difference`), summarised as pooled shares by query
group (heads reading the switch word, the pronoun, the candidates, other positions; MLPs at the query;
embeddings and biases) and by key group, each with a 95% interval over schemas. Intervention: the top ``--top``
query-side stream components (largest positive terms) are subtracted from ``blocks.L.hook_q_input`` of that
head at the query (the norm is recomputed, nothing frozen) and the preference measured again; ``--random-draws``
times, one component of closest norm per top component is removed instead. Since the top components are chosen
as the largest terms of the very preference they are removed from, this is a consistency check, not evidence
(prediction (2) is not tested on held-out data here). Heads: ``--heads`` (default the agreement heads L25H2 and
L26H2) plus the ``--top-heads`` heads with the largest mean switch sensitivity on a selection half of the schemas
(ties: more pairs right in both twins); all are analysed on the other half. The seed's
own pair is in neither half and is reported apart, once.

Run time: see ``studies/qk/README.md`` (measured, with the command); the manifest records each run's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from interp.load import PACKAGED_MODELS
from interp.registry import study_parser
from interp.study import StudyRun, start

DESCRIPTION = "Why heads attend where they do: QK attribution and interventions on Winograd twins."


@dataclass(frozen=True)
class QKConfig:
    """The study's settings (recorded in the manifest)."""

    model: str = "smollm2-135m"
    data: str = "winograd"
    pairs: int | None = None
    heads: tuple[str, ...] = ("L25H2", "L26H2")
    top_heads: int = 3
    top: int = 5
    random_draws: int = 5
    seed: int = 0


def _head(text: str) -> tuple[int, int]:
    layer, _, head = text.upper().removeprefix("L").partition("H")
    return int(layer), int(head)


def parse(argv: Sequence[str] | None) -> tuple[QKConfig, StudyRun]:
    p = study_parser("qk", DESCRIPTION, model_required=True)
    p.add_argument("--data", default="winograd", help="Winograd-style twins (a shipped name or a file)")
    p.add_argument(
        "--pairs", type=int, default=None, help="twin pairs to use (default: all; plus the seed's)"
    )
    p.add_argument("--heads", default="L25H2,L26H2", help="heads always analysed, comma separated, or ''")
    p.add_argument("--top-heads", type=int, default=3, help="heads added by selection on half the schemas")
    p.add_argument("--top", type=int, default=5, help="query components removed in the intervention")
    p.add_argument(
        "--random-draws", type=int, default=5, help="random components of matched norm per top component"
    )
    run = start(p, argv)
    args = run.args
    try:
        heads = tuple(f"L{l}H{h}" for l, h in (_head(x) for x in args.heads.split(",") if x.strip()))
    except ValueError:
        p.error(f"--heads {args.heads!r}: give heads such as L25H2,L26H2")
    if args.pairs is not None and args.pairs < 2:
        p.error(f"--pairs {args.pairs}: give at least 2 (half select heads, half test them)")
    if args.top < 1 or args.random_draws < 1:
        p.error("--top and --random-draws must be at least 1")
    config = QKConfig(
        model=args.model,
        data=args.data,
        pairs=args.pairs,
        heads=heads,
        top_heads=args.top_heads,
        top=args.top,
        random_draws=args.random_draws,
        seed=args.seed,
    )
    return config, run


def twin_pairs_of(model, config: QKConfig, items: list) -> list[tuple]:
    """The seed's pair, then up to ``config.pairs`` twin pairs of ``items``, each as two located twins."""
    from studies.data.items import ResolutionItem
    from studies.data.load import twin_pairs
    from studies.qk.measure import SEED, locate

    pairs = []
    seed_spans = [(0, 10), (24, 34)]  # "The animal", "the street"
    for text, answer in zip(SEED, (0, 1), strict=True):
        pairs.append(
            locate(model, text, (43, 45), seed_spans, answer, (text.index("too ") + 4, len(text) - 1))
        )
    out = [(("seed",), tuple(pairs), "seed")]
    for a, b in twin_pairs(items):
        if not (isinstance(a, ResolutionItem) and a.candidates == b.candidates) or (
            config.pairs is not None and len(out) > config.pairs
        ):
            continue
        if a.candidate_char_offsets is None or a.switch_char_offset is None or b.switch_char_offset is None:
            continue
        twins = tuple(_locate_item(model, item) for item in (a, b))
        out.append(((a.id, b.id), twins, a.schema_id or a.id))
    return out


def _locate_item(model, item):
    from studies.qk.measure import locate

    spans = [(o, o + len(c)) for o, c in zip(item.candidate_char_offsets, item.candidates, strict=True)]
    pronoun = (item.pronoun_char_offset, item.pronoun_char_offset + len(item.pronoun))
    switch = (item.switch_char_offset, item.switch_char_offset + len(item.switch_word))
    return locate(model, item.sentence, pronoun, spans, item.answer, switch)


def run_study(model, config: QKConfig, items: list, progress: bool = False) -> dict:
    """Locate, run, select heads, split and intervene; returns what the report shows.

    Args:
        items: the data set's items (:func:`studies.data.load.load_items`).
    """
    from studies.qk import analysis
    from studies.qk.measure import run_twin

    if not model.cfg.causal or model.cfg.norm_placement == "post":
        raise ValueError(
            f"the qk study reads a causal language model from the sentence's last token and edits each head's "
            f"query input; {config.model} is an encoder (causal={model.cfg.causal}, "
            f"norm_placement={model.cfg.norm_placement!r}); use a causal model such as smollm2-135m"
        )
    pairs = twin_pairs_of(model, config, items)
    fixed = [_head(h) for h in config.heads]
    bad = [h for h in fixed if not (0 <= h[0] < model.cfg.n_layers and 0 <= h[1] < model.cfg.n_heads)]
    if bad:
        raise ValueError(f"--heads: L{bad[0][0]}H{bad[0][1]} is not a head of {config.model}")
    select, test = analysis.split(pairs, config.seed)
    for index, (_, twins, _) in enumerate(tqdm(pairs, desc="twin pairs", disable=not progress, leave=False)):
        for twin in twins:
            run_twin(model, twin)
            if index in select:
                twin.cache = None  # selection needs the preferences only
    heads = analysis.choose_heads(pairs, select, fixed, config.top_heads)
    rng = np.random.default_rng(config.seed)
    found = [analysis.head_result(model, pairs, test, layer, head, config, rng) for layer, head in heads]
    return {
        "n_pairs": len(pairs) - 1,  # the twin pairs of the data; the seed's pair (first) is counted apart
        "select": [pairs[i][0] for i in select],
        "test": [pairs[i][0] for i in test],
        "overview": analysis.overview(pairs, select, test),
        "heads": found,
        "correction": analysis.correct(found),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and write the report; returns 0."""
    from studies.data.load import data_path, load_items
    from studies.qk.report import write_report

    config, run = parse(argv)
    clock = time.perf_counter()
    items = load_items(config.data)  # a bad file is refused before the model loads
    torch.manual_seed(config.seed)
    model = run.load(config.model)
    model_path = PACKAGED_MODELS[config.model].location() if config.model in PACKAGED_MODELS else config.model
    report = run.report(  # made before the run, so that the manifest's wall time covers it
        "Why heads attend where they do",
        subtitle="QK attribution of the pronoun's resolution on Winograd twins",
        config=config,
        model=config.model,
        model_path=model_path,
        data_paths=[data_path(config.data)],
        device=str(model.device),
        dtype=model.dtype,
    )
    results = run_study(model, config, items, not run.args.quiet)
    write_report(report, config, results, time.perf_counter() - clock)
    return run.finish(report)
