"""The seed's sentence as a feature circuit: attribution graphs of pronoun agreement and of "The animal didn't
cross the street because it was too tired / wide" on SmolLM2's replacement model.

Hypothesis. The component studies found SmolLM2-135M's agreement signal carried from the name to the final
position by attention heads L25H2 and L26H2 (coreference patching, the circuits study's EAP-IG circuit). With a
per-layer transcoder in place of every MLP, an attribution graph of the she - he logit difference at the
pronoun should then show features at the name whose influence reaches the target, through paths whose last
attention step is those heads; ablating the graph's top features should move the difference as the graph
predicts, and features of matched activation picked at random should not. For the Winograd pair the target is
the animal - street logit difference after a question ('In that sentence, "it" means the').

Metrics. First, what the model does on the graphs' prompts (``studies.data.switch``): per twin pair, the switch
sensitivity (the target in one twin minus the other's, signed toward the expected answer: does the name or the
switch word move the model?), tested by sign flips over pairs with its interval, and the bias (the target's mean
over both twins) apart, with "right in both twins" against its chance 0.25 after them. Transcoder quality per
layer and of the whole replacement (variance explained, L0, dead fraction, CE
recovered against zeroed MLPs, KL) on held-out text. Per graph: replacement and completeness scores; the top
features by influence on the target and by word; the frozen ablation of the top features against the graph's
linear prediction (minus the sum of their direct edges: must agree to float tolerance), the free ablation's
effect, and the same for random features matched by activation; head loadings (exact shares of an edge by the
last head its paths pass) of the edges from the name's top features to the target; what each graph's top
features are, from their dashboards over corpus passages (density, top examples, promoted tokens); their
explanations, scored (embedding AUC, chance 0.5) against each feature scored with another's explanation (a
seeded derangement), the paired difference being the headline; per graph, how much automatic supernodes shrink
it and the influence the collapsed graph keeps. Intervals are 95% (bootstrap over prompts with the twins of a
schema kept together, for means, fractions and shares; over schemas for the explanations' scores).

Budget: the transcoders are small (512 features, TopK 16, about 20k training tokens of the KJV) so that the
whole run takes minutes on one CPU thread; ``studies/attribution/README.md`` has the measured run time and the
findings. The transcoders are cached under ``--work`` by a key of model, corpus and settings.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from interp.load import PACKAGED_MODELS
from interp.registry import study_parser
from interp.study import StudyRun, start
from studies.attribution.explanations import ExplanationSettings
from studies.attribution.graphs import GraphSettings
from studies.attribution.measure import ProbeSettings
from studies.attribution.transcoders import TrainingSettings

DESCRIPTION = "Attribution graphs of pronoun agreement and the seed's Winograd pair on SmolLM2's transcoders."
SWITCH_LABELS = {"agreement": ('"she"', '"he"'), "winograd": ('"animal"', '"street"')}
"""What each group's target is the difference of, as a sentence reads it (the target's first token is label 0)."""
DEFAULT_WORK = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "interp" / "attribution"


@dataclass(frozen=True)
class AttributionConfig:
    """The study's settings (recorded in the manifest)."""

    model: str = "smollm2-135m"
    data: str | None = None
    texts: int = 300
    context: int = 64
    d_transcoder: int = 512
    k: int = 16
    epochs: int = 6
    train_batch_size: int = 512
    pairs: int = 6
    max_feature_nodes: int = 256
    graph_batch_size: int = 128
    top: int = 5
    random_draws: int = 5
    pool: int = 20
    loading_sources: int = 1
    heads: tuple[tuple[int, int], ...] = ((25, 2), (26, 2))
    dashboard_texts: int = 100
    explanations: bool = True
    explainer: str = "smollm2-135m"
    explanation_scorers: tuple[str, ...] = ("embedding",)
    seed_pairs: int = 0
    seed: int = 0

    def training(self) -> TrainingSettings:
        return TrainingSettings(
            self.context, self.d_transcoder, self.k, self.epochs, self.train_batch_size, self.seed
        )

    def graphs(self) -> GraphSettings:
        return GraphSettings(self.max_feature_nodes, self.graph_batch_size, self.top)

    def probes(self) -> ProbeSettings:
        return ProbeSettings(self.top, self.random_draws, self.pool, self.loading_sources, self.seed)

    def pairing(self):
        from studies.attribution.seed_pairs import PairSettings

        return PairSettings(pairs=self.seed_pairs, seed=self.seed)

    def explaining(self) -> ExplanationSettings:
        return ExplanationSettings(self.explainer, self.explanation_scorers, seed=self.seed)


def parse_heads(text: str) -> tuple[tuple[int, int], ...]:
    """``L25H2,L26H2`` -> ``((25, 2), (26, 2))``; raises one line otherwise."""
    out = []
    for piece in text.split(","):
        layer, sep, head = piece.strip().upper().removeprefix("L").partition("H")
        if not (sep and layer.isdigit() and head.isdigit()):
            raise ValueError(f"--heads {text!r}: give heads as L25H2,L26H2")
        out.append((int(layer), int(head)))
    return tuple(out)


def parse(argv: Sequence[str] | None) -> tuple[AttributionConfig, StudyRun]:
    p = study_parser("attribution", DESCRIPTION, model_required=True)
    p.add_argument("--data", default=None, help="corpus file (text, JSONL 'text', parquet); default: the KJV")
    p.add_argument(
        "--texts", type=int, default=300, help="corpus passages to train on (about 80 tokens each)"
    )
    p.add_argument("--context", type=int, default=64, help="tokens per training window")
    p.add_argument("--d-transcoder", type=int, default=512, help="features per layer")
    p.add_argument("--k", type=int, default=16, help="active features per token (TopK)")
    p.add_argument("--epochs", type=int, default=6, help="passes over the cached activations")
    p.add_argument("--train-batch-size", type=int, default=512, help="rows per training step")
    p.add_argument(
        "--pairs", type=int, default=6, help="agreement twin pairs to draw graphs for (both twins)"
    )
    p.add_argument("--max-feature-nodes", type=int, default=256, help="feature nodes per graph")
    p.add_argument("--graph-batch-size", type=int, default=128, help="rows per backward pass")
    p.add_argument("--top", type=int, default=5, help="top features ablated per graph")
    p.add_argument("--random-draws", type=int, default=5, help="random matched sets per graph")
    p.add_argument("--heads", default="L25H2,L26H2", help="heads whose loadings are reported")
    p.add_argument(
        "--dashboard-texts",
        type=int,
        default=100,
        help="corpus passages the top features' dashboards read (0: no dashboards)",
    )
    p.add_argument(
        "--seed-pairs",
        type=int,
        default=0,
        help="the seed's question across pairs: trace the N most sensitive WSC273 and agreement pairs each, "
        "choose heads and query terms on half of the schemas, test them on the other half (0: skip; 16 or "
        "fewer leave a test half of 8 pairs or fewer, which cannot reach the family's corrected level; 24 gives 12)",
    )
    add_explanation_flags(p)
    p.add_argument("--work", default=None, help=f"cache folder for the transcoders (default {DEFAULT_WORK})")
    run = start(p, argv)
    a = run.args
    for flag, value in (("--max-feature-nodes", a.max_feature_nodes), ("--top", a.top), ("--pairs", a.pairs),
                        ("--random-draws", a.random_draws), ("--texts", a.texts)):  # fmt: skip
        if value < 1:
            p.error(f"{flag} {value}: give at least 1")
    if a.seed_pairs < 0:
        p.error(f"--seed-pairs {a.seed_pairs}: give 0 (skip) or the number of pairs to trace per data set")
    if a.seed_pairs == 1:
        p.error(
            "--seed-pairs 1: one pair cannot be split into a half to choose on and a half to test; give 0 or 2+"
        )
    if a.dashboard_texts < 0:
        p.error(f"--dashboard-texts {a.dashboard_texts}: give 0 (no dashboards) or more")
    if a.k > a.d_transcoder:
        p.error(f"--k {a.k} is larger than --d-transcoder {a.d_transcoder}")
    if a.top > a.max_feature_nodes:
        p.error(f"--top {a.top} is larger than --max-feature-nodes {a.max_feature_nodes}")
    try:
        heads = parse_heads(a.heads)
        scorers = check_explanations(a)
    except (ValueError, FileNotFoundError) as err:
        p.error(str(err))
    config = AttributionConfig(
        model=a.model, data=a.data, texts=a.texts, context=a.context, d_transcoder=a.d_transcoder, k=a.k,
        epochs=a.epochs, train_batch_size=a.train_batch_size, pairs=a.pairs,
        max_feature_nodes=a.max_feature_nodes, graph_batch_size=a.graph_batch_size, top=a.top,
        random_draws=a.random_draws, heads=heads, dashboard_texts=a.dashboard_texts,
        explanations=not a.no_explanations, explainer=a.explainer, explanation_scorers=scorers,
        seed_pairs=a.seed_pairs, seed=a.seed,
    )  # fmt: skip
    return config, run


def add_explanation_flags(p) -> None:
    """The flags of the explanations step."""
    p.add_argument(
        "--no-explanations",
        action="store_true",
        help="no explanations of the top features (nor their baseline)",
    )
    p.add_argument(
        "--explainer",
        default="smollm2-135m",
        help="who writes the explanations: a packaged name or model folder, the URL of an OpenAI-compatible "
        "endpoint, or 'tokens' (the strongest tokens of the examples shown, no model)",
    )
    p.add_argument(
        "--explanation-scorers",
        default="embedding",
        help="scores of the explanations, comma separated, of embedding, detection, fuzzing (the last two ask "
        "the explainer's model)",
    )


def check_explanations(a) -> tuple[str, ...]:
    """The explanation flags checked before any work (the explainer found, an endpoint answering); the scorers."""
    from interp.preflight import check_command
    from interp.sae.explanations import SCORERS
    from interp.sae.explanations.endpoint import EndpointBackend, is_url
    from studies.attribution.explanations import TOKENS

    scorers = tuple(x.strip() for x in a.explanation_scorers.split(",") if x.strip())
    unknown = [x for x in scorers if x not in SCORERS]
    if unknown or not scorers:
        raise ValueError(
            f"--explanation-scorers {a.explanation_scorers!r}: choose from {', '.join(SCORERS)}, comma separated"
        )
    if a.no_explanations:
        return scorers
    if not a.dashboard_texts:
        raise ValueError(
            "--dashboard-texts 0 writes no dashboards to explain; give --no-explanations or --dashboard-texts 1+"
        )
    if a.explainer == TOKENS and scorers != ("embedding",):
        raise ValueError(
            f"--explainer tokens has no model to answer {', '.join(x for x in scorers if x != 'embedding')}; "
            "give --explanation-scorers embedding, or a model or URL as --explainer"
        )
    if "embedding" in scorers:
        check_command(model="minilm-l6")
    if is_url(a.explainer):
        EndpointBackend(a.explainer).check()
    elif a.explainer not in (TOKENS, a.model):
        check_command(model=a.explainer)
    return scorers


def run_study(model, config: AttributionConfig, corpus, work: Path, progress: bool, items=None) -> dict:
    """Train or reuse the transcoders, evaluate them, draw and test every graph; the report's inputs."""
    from interp.circuits.features.targets import check_targets
    from studies.attribution import dashboards, measure, transcoders
    from studies.attribution.prompts import AGREEMENT_TARGET, SEED_TARGET, agreement_prompts, seed_prompts
    from studies.data.load import load_items

    bad = [h for h in config.heads if not (0 <= h[0] < model.cfg.n_layers and 0 <= h[1] < model.cfg.n_heads)]
    if bad:
        raise ValueError(
            f"--heads: L{bad[0][0]}H{bad[0][1]} is not a head of {config.model} "
            f"({model.cfg.n_layers} layers, {model.cfg.n_heads} heads)"
        )
    check_targets(model, [*AGREEMENT_TARGET, *SEED_TARGET])  # before any training
    items = load_items("agreement") if items is None else items
    trained = transcoders.trained_transcoders(
        model, corpus.texts, corpus.source, config.training(), work, progress
    )
    clock = time.perf_counter()
    _, held = transcoders.split_windows(model, corpus.texts, config.context)
    quality = transcoders.quality(model, trained.transcoders, held)
    eval_s = time.perf_counter() - clock
    groups = {"agreement": agreement_prompts(model, items, config.pairs), "winograd": seed_prompts(model)}
    out = {"trained": trained, "quality": quality, "eval_seconds": eval_s, "groups": {}, "graphs": {}}
    for name, prompts in groups.items():
        clock = time.perf_counter()
        rows, tables = [], {}
        for prompt in tqdm(prompts, desc=f"{name} graphs", disable=not progress):
            row, table, out["graphs"][prompt.name] = measure.measure_prompt(
                model, trained.transcoders, prompt, config.graphs(), config.probes(), progress
            )
            rows.append(row)
            tables[prompt.name] = table
        out["groups"][name] = {
            "prompts": prompts,
            "rows": rows,
            "features": tables,
            "summary": measure.summarise(rows, config.seed),
            "switch": measure.switch(rows, SWITCH_LABELS[name], config.seed),
            "head_shares": measure.head_shares([r["loadings"] for r in rows]),
            "seconds": time.perf_counter() - clock,
        }
    out["seed"] = _seed_question(model, trained.transcoders, config, groups, progress)
    if config.seed_pairs:
        out["seed_pairs"] = _seed_pairs(model, trained.transcoders, config, items, progress)
    if config.dashboard_texts:
        clock = time.perf_counter()
        tables = {p: t for group in out["groups"].values() for p, t in group["features"].items()}
        features = dashboards.top_features(tables, config.top)
        texts = corpus.texts[: config.dashboard_texts]
        folder, records = dashboards.write(
            model, trained.transcoders, texts, features, trained.folder, progress
        )
        out["dashboards"] = {"folder": folder, "records": records, "seconds": time.perf_counter() - clock}
    out["supernodes"] = propose_supernodes(model, trained.transcoders, out, config.seed)
    if config.explanations and "dashboards" in out:
        out["explanations"] = explain_features(model, config, out, progress)
    return out


def propose_supernodes(model, tc, out: dict, seed: int) -> dict:
    """Automatic supernodes on every graph (``out["graphs"]`` get them); per graph and per group, summarised."""
    from studies.attribution import supernodes

    clock = time.perf_counter()
    found: dict = {"graphs": {}, "reports": {}, "groups": {}}
    for name, group in out["groups"].items():
        rows = []
        for prompt in group["prompts"]:
            graph, report, row = supernodes.propose(out["graphs"][prompt.name], model, tc)
            out["graphs"][prompt.name] = graph
            found["reports"][prompt.name] = report
            rows.append({"prompt": prompt.name, "schema": prompt.schema, **row})
        found["graphs"].update({r["prompt"]: r for r in rows})
        found["groups"][name] = supernodes.summarise(rows, [r["schema"] for r in rows], seed)
    found["seconds"] = time.perf_counter() - clock
    return found


def explain_features(model, config: AttributionConfig, out: dict, progress: bool) -> dict:
    """Explanations of the dashboards' features, scored against the shuffled-explanation baseline."""
    from interp.load import load
    from interp.sae.explanations import (
        CachedBackend,
        EmbeddingScorer,
        LocalBackend,
        ResponseCache,
        SentenceEmbedder,
        chat_template_of,
    )
    from interp.sae.explanations.endpoint import EndpointBackend, is_url
    from studies.attribution import explanations

    clock = time.perf_counter()
    settings = config.explaining()
    work = out["dashboards"]["folder"].parent.parent  # the dashboards' cache folder
    embedding = None
    if "embedding" in settings.scorers:
        embedding = EmbeddingScorer(
            SentenceEmbedder(load("minilm-l6", device=model.device)), seed=config.seed
        )
    backend = None
    if is_url(config.explainer):
        backend = EndpointBackend(config.explainer)
    elif config.explainer != explanations.TOKENS:
        explainer = model if config.explainer == config.model else load(config.explainer, device=model.device)
        backend = LocalBackend(
            explainer, name=config.explainer, chat_template=chat_template_of(config.explainer)
        )
    if backend is not None:
        backend = CachedBackend(backend, ResponseCache(work / "explanations-cache.jsonl"))
    features = list(out["dashboards"]["records"])
    rows = explanations.run(
        out["dashboards"]["folder"], features, settings, backend, embedding, work, progress
    )
    schemas = explanations.schemas_of(out["groups"], config.top)
    summary = explanations.summarise(rows, schemas, settings.scorers, config.seed)
    return {"rows": rows, "summary": summary, "seconds": time.perf_counter() - clock}


def write_graph_files(results: dict, model, out: Path) -> list[Path]:
    """Every graph in ``OUT/graphs/PROMPT/`` (with its supernodes, its dashboards linked and the explanations as
    its feature nodes' ``clerp``), once the report is written."""
    from interp.circuits.features.labels import add_labels

    tc = results["trained"].transcoders
    scan = (
        out / "dashboards" / "features" / results["dashboards"]["folder"].name
        if "dashboards" in results
        else None
    )
    labels = {
        r["featureIndex"]: r["explanation"]
        for r in results.get("explanations", {}).get("rows", [])
        if "explanation" in r
    }
    written = []
    for name, graph in results["graphs"].items():
        folder = out / "graphs" / name
        graph.save(
            folder, model=model, transcoders=tc, slug=name, dashboards=scan,
            supernode_report=results["supernodes"]["reports"].get(name),
        )  # fmt: skip
        if labels and scan is not None:
            add_labels(folder, labels, scan.name)
        written.append(folder)
    return written


def _seed_question(model, tc, config: AttributionConfig, groups: dict, progress: bool) -> dict:
    """The referent's edge into the answer explained by its heads and tested (:mod:`studies.attribution.seed`)."""
    from studies.attribution import seed

    clock = time.perf_counter()
    settings = seed.SeedSettings(draws=config.random_draws, seed=config.seed)
    found = seed.run(model, tc, groups, config.graphs(), settings, progress)
    return {**found, "seconds": time.perf_counter() - clock}


def _seed_pairs(model, tc, config: AttributionConfig, agreement: list, progress: bool) -> dict:
    """The seed's question on the most sensitive pairs of each data set (:mod:`studies.attribution.seed_pairs`)."""
    from studies.attribution import seed_pairs
    from studies.data.load import load_items

    clock = time.perf_counter()
    items = {"winograd": load_items("winograd"), "agreement": agreement}
    found = seed_pairs.run(model, tc, items, config.graphs(), config.pairing(), progress)
    return {**found, "seconds": time.perf_counter() - clock}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and write the report; returns 0."""
    from studies.attribution.dashboards import publish
    from studies.attribution.report import write_report
    from studies.data.corpus import load_corpus
    from studies.data.load import data_path

    config, run = parse(argv)
    clock = time.perf_counter()
    torch.manual_seed(config.seed)
    corpus = load_corpus(config.data, config.texts, config.seed)
    work = Path(run.args.work) if run.args.work else DEFAULT_WORK
    work.mkdir(parents=True, exist_ok=True)
    model = run.load(config.model)
    results = run_study(model, config, corpus, work, not run.args.quiet)
    model_path = (
        PACKAGED_MODELS[config.model].location() if config.model in PACKAGED_MODELS else Path(config.model)
    )
    report = run.report(
        "The seed's sentence as a feature circuit",
        subtitle="Attribution graphs of pronoun agreement and of the Winograd pair on SmolLM2's transcoders",
        config=config,
        model=config.model,
        model_path=model_path,
        data_paths=[
            p
            for p in (
                corpus.path,
                data_path("agreement"),
                data_path("winograd") if config.seed_pairs else None,
            )
            if p is not None
        ],
        device=str(model.device),
        dtype=model.dtype,
    )
    with run.step("figures and the report"):
        write_report(report, model, config, corpus, results, time.perf_counter() - clock)
    status = run.finish(report)
    if "dashboards" in results:  # beside the report, once it is written (a report folder holds only a report)
        publish(results["dashboards"]["folder"], Path(run.args.out))
    write_graph_files(results, model, Path(run.args.out))
    return status
