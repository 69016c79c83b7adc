"""``interp autointerp DIR --explainer (MODEL | URL)``: explain and score the features of a dashboards folder.

Before any feature is read: the flags must be valid (each refused in one line naming the flag, the value and
what it takes), the folder must hold feature files (and the features asked for), the output and cache files
writable, the embedding model found; an explainer URL must answer as an OpenAI-compatible chat endpoint (its
model list, then a one-token request, each within a short limit of its own), and an explainer model must be
found. Then :func:`interp.sae.explanations.autointerp` runs, and the explanations become the ``clerp`` labels of
the graph files in the folder (:func:`interp.circuits.features.labels.add_labels`). What fails for one feature
is printed in one line and written in its row; a rerun continues where the last one stopped and asks nothing
that it already has an answer to.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from interp.arguments import add_command, add_device_arguments, non_negative_int, positive_float, positive_int

EXAMPLE = "interp autointerp dashboards/ --explainer http://127.0.0.1:8000/v1 --scorer detection,embedding"
OUT, CACHE = "explanations.jsonl", "explanations-cache.jsonl"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp autointerp`` to the subcommands."""
    p = add_command(
        sub,
        "autointerp",
        summary="explanations of a dashboards folder's features, written by a language model and scored",
        description=(
            "Ask a language model (a model interp loads, or an OpenAI-compatible endpoint) to explain each\n"
            "feature from its feature file, score the explanations (detection, fuzzing, embedding), write one\n"
            "JSON line per feature to DIR/explanations.jsonl, and label the graph files' nodes in DIR.\n"
            "Answers are cached as they arrive, so a rerun continues and asks nothing twice."
        ),
        example=EXAMPLE,
    )
    p.add_argument("dir", help="the dashboards folder (features/<scan>/<featureIndex>.json, index.json)")
    p.add_argument(
        "--explainer",
        required=True,
        help="a packaged name, HF folder or .gguf file, or the URL of an OpenAI-compatible endpoint",
    )
    p.add_argument(
        "--explainer-model",
        default=None,
        help="with a URL: the model to ask for (default: the one it serves)",
    )
    p.add_argument("--scorer", action=ScorerFlag, default=None)
    p.add_argument(
        "--features",
        type=feature_list,
        default=None,
        help="LAYER:FEATURE,... to explain (default: every feature)",
    )
    p.add_argument("--scan", default=None, help="the scan under features/ (default: the only one)")
    p.add_argument("--concurrency", type=positive_int, default=8, help="with a URL: requests in flight")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        help="with a URL: seconds to wait for one answer (the pre-flight waits at most 30)",
    )
    p.add_argument(
        "--retries", type=non_negative_int, default=4, help="with a URL: retries of a failed request"
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=8, help="with a model: prompts generated together"
    )
    p.add_argument("--n-explain", type=positive_int, default=20, help="examples shown to the explainer")
    p.add_argument(
        "--n-test", type=positive_int, default=20, help="activating examples scored (and as many not)"
    )
    p.add_argument("--per-prompt", type=positive_int, default=5, help="examples per scorer prompt")
    p.add_argument("--context", type=positive_int, default=32, help="tokens per example shown")
    p.add_argument(
        "--min-context",
        type=positive_int,
        default=8,
        help="shortest examples scored, where the files hold no zero runs of --context tokens",
    )
    p.add_argument("--seed", type=int, default=0, help="the split, order and marks of the examples")
    p.add_argument(
        "--embedding-model", default="minilm-l6", help="the sentence encoder of the embedding score"
    )
    p.add_argument("--out", default=None, help=f"the JSON Lines file of results (default: DIR/{OUT})")
    p.add_argument("--cache", default=None, help=f"the answer cache (default: DIR/{CACHE})")
    add_device_arguments(p)
    p.set_defaults(fn=run)


class ScorerFlag(argparse.Action):
    """``--scorer NAME,...``: checked against the scorer registry, which also writes the flag's help.

    The registry is imported when the flag is read or its help shown, not when ``interp`` starts: it brings the
    explanations package, which ``interp --help`` and the other commands should not pay for.
    """

    @property
    def help(self) -> str:
        from interp.sae.explanations.registry import SCORERS

        listed = "; ".join(f"{kind.name}: {kind.summary}" for kind in SCORERS.values())
        return f"scores to compute, comma separated (default: all): {listed}"

    @help.setter
    def help(self, value: Any) -> None:
        pass  # written from the registry above

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        from interp.sae.explanations.registry import scorer_names

        try:
            setattr(namespace, self.dest, scorer_names(values))
        except ValueError as err:
            raise argparse.ArgumentError(self, f"invalid value {values!r}: {err}") from None


def feature_list(text: str) -> list:
    """An argparse ``type``: ``3:17,5:2`` as feature ids."""
    from interp.sae.explanations import FeatureId

    features = [FeatureId.parse(part) for part in text.split(",") if part.strip()]
    if not features:
        raise ValueError("no feature named; write LAYER:FEATURE pairs, comma separated, such as 3:17,5:2")
    return features


def run(args: argparse.Namespace) -> int:
    """Check everything, then explain, score and label."""
    plan = preflight(args)
    from interp.circuits.features.labels import add_labels
    from interp.sae.explanations import CachedBackend, ResponseCache, autointerp, read_rows

    embedding = _embedding(args) if plan["encoder"] else None
    backend = CachedBackend(_backend(args, plan), ResponseCache(plan["cache"]))
    summary = autointerp(
        plan["folder"],
        backend,
        plan["out"],
        features=plan["features"],
        settings=plan["settings"],
        embedding=embedding,
        progress=not args.quiet,
    )
    for line in summary.errors:
        print(f"interp: feature {line}", file=sys.stderr)
    rows = read_rows(plan["out"])
    labels = {i: r["explanation"] for i, r in rows.items() if r.get("explanation")}
    for graph in add_labels(plan["folder"].root, labels, plan["folder"].scan):
        what = f"skipped ({graph.skipped})" if graph.skipped else f"{graph.labelled} feature nodes labelled"
        if graph.pages:
            what += f", and in {', '.join(page.name for page in graph.pages)}"
        print(f"{graph.path}: {what}")
    print(
        f"{plan['out']}: {summary.written} features written ({summary.failed} with an error), "
        f"{summary.skipped} already done; {summary.asked} requests sent to {backend.name}"
    )
    return 0


def preflight(args: argparse.Namespace) -> dict:
    """Everything that can be checked before a model loads or a feature is read."""
    from interp.preflight import check_command, check_output_file, check_placement, find_model
    from interp.sae.explanations import SCORERS, FeatureFiles, Settings
    from interp.sae.explanations.endpoint import EndpointBackend, is_url

    placement = check_placement(args)
    if args.min_context > args.context:
        raise ValueError(
            f"--min-context {args.min_context} is more than --context {args.context}; give at most {args.context}"
        )
    url = is_url(args.explainer)
    if url and importlib.util.find_spec("openai") is None:
        raise ValueError(
            f"--explainer {args.explainer} needs the openai package: pip install 'interp[explanations]'"
        )
    if not url and args.explainer_model is not None:
        raise ValueError(
            f"--explainer-model {args.explainer_model} names a model served at a URL, but --explainer "
            f"{args.explainer} is not one; give --explainer a URL (http://...), or leave --explainer-model out"
        )
    folder = FeatureFiles.open(args.dir, args.scan)
    features = None if args.features is None else folder.select(args.features)
    scorers = args.scorer or tuple(SCORERS)
    settings = Settings(
        scorers=scorers,
        n_explain=args.n_explain,
        n_test=args.n_test,
        context=args.context,
        min_context=args.min_context,
        per_prompt=args.per_prompt,
        seed=args.seed,
    )
    out = check_output_file(args.out or folder.root / OUT, flag="--out", suffixes=(".jsonl",), example=OUT)
    cache = check_output_file(
        args.cache or folder.root / CACHE, flag="--cache", suffixes=(".jsonl",), example=CACHE
    )
    check_command(device=args.device, dtype=args.dtype)
    encoder = any(SCORERS[name].answered_by == "encoder" for name in scorers)
    if encoder:
        find_model(args.embedding_model, flag="--embedding-model")
    endpoint = None
    if url:
        endpoint = EndpointBackend(
            args.explainer,
            model=args.explainer_model,
            concurrency=args.concurrency,
            timeout=args.timeout,
            max_retries=args.retries,
            say=None if args.quiet else _say,
        )
        endpoint.check()
    else:
        find_model(args.explainer, flag="--explainer")
    return {
        "folder": folder,
        "features": features,
        "settings": settings,
        "out": out,
        "cache": cache,
        "encoder": encoder,
        "endpoint": endpoint,
        "placement": placement,
    }


def _say(line: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(f"interp: {line}", file=sys.stderr)  # above a progress bar, where one is shown


def _backend(args: argparse.Namespace, plan: dict):
    if plan["endpoint"] is not None:
        return plan["endpoint"]
    from interp.load import load
    from interp.sae.explanations import LocalBackend, chat_template_of

    model = load(args.explainer, device=args.device, dtype=args.dtype, **plan["placement"])
    if not model.cfg.causal or model.cfg.lm_head == "none":
        raise ValueError(
            f"--explainer {args.explainer} is not a language model that generates text; give one that does"
        )
    return LocalBackend(
        model,
        name=str(args.explainer),
        chat_template=chat_template_of(args.explainer),
        batch_size=args.batch_size,
    )


def _embedding(args: argparse.Namespace):
    from interp.load import load
    from interp.sae.explanations import EmbeddingScorer, SentenceEmbedder

    model = load(args.embedding_model, device=args.device)
    try:
        return EmbeddingScorer(SentenceEmbedder(model, name=str(args.embedding_model)))
    except ValueError as err:
        raise ValueError(f"--embedding-model: {err}") from None
