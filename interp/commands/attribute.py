"""``interp attribute MODEL --transcoders DIR --prompt TEXT --out DIR``: an attribution graph and its viewer.

Everything that can be checked before the model loads is checked first, each in one line: the output folder
(and that it holds no file of someone else's that the graph's would replace: :func:`interp.preflight.check_owned`),
the transcoders folder, the numbers, the dashboards, the subgraph file through, the device and the dtype; then,
with the model, that the transcoders fit it, that each ``--target`` is one token, that the prompt fits the
context, that the dashboards were made with this model and these transcoders, and that every node the subgraph
file names will be in the graph, before any attribution runs. The steps after attribution that take a while
(explaining attention, proposing supernodes) say so as they start and end, and the last line counts what each
added.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.arguments import add_command, add_device_arguments, non_negative_int, positive_int

EXAMPLE = 'interp attribute smollm2-135m --transcoders tc/ --prompt "The cat sat on the" --out graph/'


def fraction(text: str) -> float:
    """A number in [0, 1] (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text}")
    return value


def gigabytes(text: str) -> float:
    """A positive, finite number of GiB (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GiB such as 2.5, got {text!r}") from None
    if not 0.0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of GiB such as 2.5, got {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp attribute`` to the subcommands."""
    p = add_command(
        sub,
        "attribute",
        summary="an attribution graph of transcoder features for one prompt, with an offline viewer",
        description=(
            "Trace which transcoder features, errors and tokens cause a model's next-token logits on one\n"
            "prompt (attention patterns, norms and MLP outputs frozen), and write graph.safetensors, a\n"
            "pruned graph.json in Neuronpedia's schema, graph-metadata.json and index.html, the offline viewer:\n"
            "a folder circuit-tracer's local server serves. --dashboards links the features' dashboards."
        ),
        example=EXAMPLE,
    )
    p.add_argument("model", help="packaged name, Hugging Face folder or .gguf file")
    p.add_argument(
        "--transcoders", required=True, help="the transcoders' folder (circuit-tracer or Gemma Scope 2)"
    )
    p.add_argument("--prompt", required=True, help="the text; a special token is put first if it has none")
    p.add_argument("--out", required=True, help="the folder to write (created if missing)")
    p.add_argument(
        "--target",
        action="append",
        default=None,
        help="a target token, repeatable (default: the likeliest next tokens)",
    )
    p.add_argument("--max-logits", type=positive_int, default=10, help="most logit targets")
    p.add_argument(
        "--logit-probability",
        type=fraction,
        default=0.95,
        help="targets until this probability",
    )
    p.add_argument(
        "--max-feature-nodes",
        type=positive_int,
        default=None,
        help="most feature nodes (default: all active features)",
    )
    p.add_argument("--batch-size", type=positive_int, default=256, help="rows per backward pass")
    p.add_argument(
        "--max-memory-gb",
        type=gigabytes,
        default=None,
        metavar="G",
        help="attribution's peak memory above the model and transcoders, in GiB: fewer rows per backward "
        "pass where --batch-size would not fit, refused up front where one row cannot (default: no budget)",
    )
    p.add_argument(
        "--node-threshold", type=fraction, default=0.8, help="pruning of graph.json: the nodes kept"
    )
    p.add_argument(
        "--edge-threshold", type=fraction, default=0.98, help="pruning of graph.json: the edges kept"
    )
    p.add_argument(
        "--store",
        default=None,
        help="an activation store of the transcoders' input hooks: top contexts per feature (default: none)",
    )
    p.add_argument(
        "--dashboards",
        default=None,
        help="the transcoders' dashboards (interp dashboards --out DIR): linked, shown per feature (default: none)",
    )
    p.add_argument("--slug", default="graph", help="the graph's name: its file is SLUG.json")
    p.add_argument(
        "--explain-attention",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="explain the N strongest edges between positions: their heads and why each attends (default: 0)",
    )
    p.add_argument(
        "--supernodes",
        choices=("auto",),
        default=None,
        help="propose supernodes among the kept feature nodes, saved in SLUG.json's qParams (default: none)",
    )
    p.add_argument(
        "--subgraph",
        default=None,
        metavar="FILE",
        help="pinned nodes and supernodes to save with the graph: a graph file or a qParams JSON file (default: none)",
    )
    add_device_arguments(p)
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    """Check the command, then build, save and describe the graph."""
    import sys

    from interp.preflight import check_placement

    placement = check_placement(args)
    found = preflight(args)
    from interp.circuits.features import attribute
    from interp.circuits.features.reading import readable
    from interp.load import load
    from interp.sae import load_transcoders

    model = load(args.model, device=args.device, dtype=args.dtype, **placement)
    tc = load_transcoders(found["transcoders"], model=model, device=model.device, dtype=model.dtype)
    keep = _checked_with_model(args, model, tc, found["subgraph"])
    graph = attribute(
        model,
        tc,
        args.prompt,
        **_targets(args),
        max_feature_nodes=args.max_feature_nodes,
        batch_size=args.batch_size,
        max_memory_gb=args.max_memory_gb,
        keep=keep,
        progress=not args.quiet,
    )
    graph.metadata.update(model=str(args.model), transcoders=str(found["transcoders"]))

    def say(line: str) -> None:
        if not args.quiet:
            print(f"interp attribute: {line}", file=sys.stderr, flush=True)

    graph, explained, report = readable(
        graph,
        model,
        tc,
        explain=args.explain_attention,
        supernodes=args.supernodes,
        subgraph=found["subgraph"],
        node_threshold=args.node_threshold,
        edge_threshold=args.edge_threshold,
        say=say,
    )
    contexts = None
    if found["store"] is not None:
        from interp.store import ActivationStore

        contexts = ActivationStore(found["store"])
    out = graph.save(
        found["out"],
        node_threshold=args.node_threshold,
        edge_threshold=args.edge_threshold,
        model=model,
        transcoders=tc,
        contexts=contexts,
        slug=args.slug,
        dashboards=args.dashboards,
        attention=explained,
        supernode_report=report,
    )
    print(_summary(graph, args, out, explained, report))
    return 0


def preflight(args: argparse.Namespace) -> dict:
    """Everything that can be checked before the model loads, each mistake in one line: the output folder (and
    that it holds nothing of someone else's that the graph's files would replace), the transcoders folder, the
    store, the prompt, the slug, the dashboards (finished, and free to link), and the subgraph file, through.

    Returns:
        ``out``, ``transcoders`` and ``store`` paths and ``subgraph`` (a checked
        :class:`~interp.circuits.features.subgraph.SubgraphFile`, or ``None``).
    """
    from interp.circuits.features.graph_folder import check_folder
    from interp.preflight import check_command
    from interp.sae.dashboards.folder import check_scan

    check_scan(args.slug, "--slug")
    out = check_folder(args.out, args.slug)
    check_command(device=args.device, dtype=args.dtype, model=args.model)
    folder = Path(args.transcoders).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"--transcoders {folder} is not a folder; pass the transcoders' folder")
    store = None if args.store is None else Path(args.store).expanduser()
    if store is not None and not (store / "meta.json").is_file():
        raise FileNotFoundError(
            f"--store {store} is not an activation store (no meta.json); see interp cache"
        )
    if not args.prompt.strip():
        raise ValueError('--prompt is empty; pass a text, such as "The cat sat on the"')
    if args.dashboards is not None:
        from interp.sae.dashboards.link import check_link

        check_link(out, args.dashboards)
    subgraph = None
    if args.subgraph is not None:
        from interp.circuits.features.subgraph import subgraph_file

        subgraph = subgraph_file(args.subgraph)
    return {"out": out, "transcoders": folder, "store": store, "subgraph": subgraph}


def _checked_with_model(args: argparse.Namespace, model, tc, subgraph) -> list[str]:
    """What needs the model but no attribution: the dashboards were made with this model and these transcoders,
    and every node the subgraph file names will be in the graph (one frozen forward pass); the pinned feature
    nodes, which attribution keeps whatever ``--max-feature-nodes``."""
    if args.dashboards is not None:
        from interp.sae.dashboards.link import check_identity

        check_identity(args.dashboards, model, tc)
    if subgraph is None:
        return []
    from interp.circuits.features.pins import check_pins, prospect

    will = prospect(model, tc, args.prompt, **_targets(args))
    return check_pins(subgraph, will, vocab=model.cfg.d_vocab, max_feature_nodes=args.max_feature_nodes)


def _targets(args: argparse.Namespace) -> dict:
    """How the graph's logit targets are chosen: what ``attribute`` and the nodes checked before it share."""
    return {
        "targets": args.target,
        "max_logits": args.max_logits,
        "logit_probability": args.logit_probability,
    }


def _summary(graph, args: argparse.Namespace, out: Path, explained: list, report: dict | None) -> str:
    """The last line: the scores, what was explained and proposed, and the files written."""
    replacement, completeness = graph.scores()
    read = []
    if args.explain_attention:
        read.append(f"{len(explained)} of {args.explain_attention} attention edges explained")
    if report is not None:
        proposed = len(report["proposed"])
        why = (
            ""
            if proposed
            else f" (no two feature nodes at one position have decoder cosine >= {report['decoder_cosine']} "
            f"and effect cosine >= {report['effect_cosine']})"
        )
        read.append(f"{proposed} supernodes proposed{why}")
    linked = "" if args.dashboards is None else ", with the dashboards in features/"
    return (
        f"{graph}: replacement {replacement:.3f}, completeness {completeness:.3f}; "
        + "".join(f"{r}; " for r in read)
        + f"wrote {out / 'graph.safetensors'}, {args.slug}.json, graph-metadata.json and index.html{linked}"
    )
