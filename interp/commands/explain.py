"""``interp explain TEXT``: one sentence's attention, step by step, as a self-contained HTML page."""

from __future__ import annotations

import argparse
import sys

from interp.arguments import add_command, add_device_arguments, non_negative_int


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp explain`` to the subcommands."""
    p = add_command(
        sub,
        "explain",
        summary="explain one sentence's attention, step by step, as an HTML page",
        description=(
            "Run a model on one sentence and write a page that follows one token through one head: its\n"
            "query, the keys it is compared with, the scores, the pattern, the values it mixes and what the\n"
            "head writes. The page needs no network; open it in a browser."
        ),
        example='interp explain "The animal did not cross the street because it was tired" --token it',
    )
    p.add_argument("text", help="the sentence to explain")
    p.add_argument("--model", default="smollm2-135m", help="packaged name, HF folder or .gguf file")
    p.add_argument(
        "--token", default=None, help="the token to follow, as text or index (default: the last one)"
    )
    p.add_argument(
        "--layer",
        type=non_negative_int,
        default=None,
        help="the layer shown first, from 0 (default: the one whose head attends most away from the first key)",
    )
    p.add_argument(
        "--head",
        type=non_negative_int,
        default=None,
        help="the head shown first, from 0 (default: the head that attends most, as for --layer)",
    )
    p.add_argument(
        "--twin",
        default=None,
        help="a twin text; the 'why here' section also splits what changed in it (default: none)",
    )
    p.add_argument("--out", default="explain.html", help="the HTML file to write")
    add_device_arguments(p)
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    """Check the command, then write the page."""
    from interp.preflight import check_command, check_placement, find_model

    placement = check_placement(args)  # the placement flags, before the model is looked for
    check_command(
        out=args.out, out_file=((".html", ".htm"), "explain.html"), device=args.device, dtype=args.dtype
    )
    find_model(args.model, flag="--model")
    if not args.text.strip():
        raise ValueError('the text to explain is empty; pass a sentence, such as "The cat sat on the mat"')
    from interp.load import load
    from interp.report.explain import explain_data
    from interp.report.explainer_page import render_explainer, save_page

    if not args.quiet:
        print(f"loading {args.model} ...", file=sys.stderr)
    model = load(args.model, device=args.device, dtype=args.dtype, **placement)
    data = explain_data(
        model,
        args.text,
        token=args.token,
        layer=args.layer,
        head=args.head,
        progress=not args.quiet,
        twin=args.twin,
    )  # checks --layer and --head against the model before its forward pass
    path = save_page(render_explainer(data), args.out)
    if not args.quiet:
        query = data["query"]
        print(
            f"wrote {path} ({path.stat().st_size / 2**20:.2f} MiB): token {query} {data['tokens'][query]!r}, "
            f"layer {data['layer']} head {data['head']}",
            file=sys.stderr,
        )
    return 0
