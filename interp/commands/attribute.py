"""``interp attribute MODEL --transcoders DIR --prompt TEXT --out DIR``: an attribution graph and its viewer.

Everything that can be checked before the model loads is checked first, each in one line: the output folder,
the transcoders folder, the numbers, the device and the dtype; then, with the model, that the transcoders fit
it, that each ``--target`` is one token and that the prompt fits the context, before any attribution runs.
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
    from interp.preflight import check_command, check_output_folder, check_placement

    placement = check_placement(args)
    out = check_output_folder(args.out, flag="--out")
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
    from interp.sae.dashboards.folder import check_scan

    check_scan(args.slug, "--slug")
    if args.dashboards is not None:
        from interp.sae.dashboards.link import resolve

        resolve(args.dashboards)
    if args.subgraph is not None:
        from interp.circuits.features.subgraph import subgraph_file

        subgraph_file(args.subgraph)  # readable and holding a subgraph, before the model loads

    from interp.circuits.features import attribute
    from interp.circuits.features.reading import readable
    from interp.load import load
    from interp.sae import load_transcoders

    model = load(args.model, device=args.device, dtype=args.dtype, **placement)
    tc = load_transcoders(folder, model=model, device=model.device, dtype=model.dtype)
    graph = attribute(
        model,
        tc,
        args.prompt,
        targets=args.target,
        max_logits=args.max_logits,
        logit_probability=args.logit_probability,
        max_feature_nodes=args.max_feature_nodes,
        batch_size=args.batch_size,
        max_memory_gb=args.max_memory_gb,
        progress=not args.quiet,
    )
    graph.metadata.update(model=str(args.model), transcoders=str(folder))

    graph, explained, report = readable(
        graph,
        model,
        tc,
        explain=args.explain_attention,
        supernodes=args.supernodes,
        subgraph=args.subgraph,
        node_threshold=args.node_threshold,
        edge_threshold=args.edge_threshold,
    )
    contexts = None
    if store is not None:
        from interp.store import ActivationStore

        contexts = ActivationStore(store)
    graph.save(
        out,
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
    replacement, completeness = graph.scores()
    linked = "" if args.dashboards is None else ", with the dashboards in features/"
    print(
        f"{graph}: replacement {replacement:.3f}, completeness {completeness:.3f}; wrote "
        f"{out / 'graph.safetensors'}, {args.slug}.json, graph-metadata.json and index.html{linked}"
    )
    return 0
