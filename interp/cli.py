"""The ``interp`` command.

Each subcommand is a thin shell over a library function, imported only when that subcommand runs so that
``interp models`` does not pay for matplotlib. Studies are found through the ``interp.studies`` entry-point
group, so packages other than this one can register their own.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def _cmd_models(args: argparse.Namespace) -> int:
    from interp.load.packaged import format_packaged_models

    print(format_packaged_models())
    return 0


def _cmd_study(args: argparse.Namespace) -> int:
    from interp.registry import run_study

    return run_study(args.name, args.study_args)


def _cmd_explain(args: argparse.Namespace) -> int:
    from interp.report.explain import explain_main

    return explain_main(args)


def _cmd_cache(args: argparse.Namespace) -> int:
    from interp.store import cache_main

    return cache_main(args)


def _cmd_generate(args: argparse.Namespace) -> int:
    from interp.generation.cli import generate_main

    return generate_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interp", description="See inside a transformer, by name.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", help="list the packaged models and whether each is installed")
    p.set_defaults(fn=_cmd_models)

    p = sub.add_parser("study", help="run a registered study and write its report", add_help=False)
    p.add_argument("name", nargs="?", default=None, help="study name (omit to list them)")
    p.add_argument("study_args", nargs=argparse.REMAINDER, help="arguments passed to the study")
    p.set_defaults(fn=_cmd_study)

    p = sub.add_parser("explain", help="explain one sentence's attention, step by step, as an HTML page")
    p.add_argument("text")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--token", default=None, help="the token to follow (default: the last one)")
    p.add_argument("--layer", type=int, default=None)
    p.add_argument("--head", type=int, default=None)
    p.add_argument("--out", default="explain.html")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=_cmd_explain)

    p = sub.add_parser("cache", help="stream a data set through a model into an activation store")
    p.add_argument("model")
    p.add_argument("--data", required=True, help="a text file (one item a line) or JSONL with 'text'")
    p.add_argument("--hooks", required=True, help="hook names or a glob, comma separated")
    p.add_argument("--out", required=True)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--positions", default="all", help="'all', 'last', or comma-separated indices")
    p.add_argument("--shard-rows", type=int, default=4096)
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=_cmd_cache)

    from interp.generation.cli import add_generate_arguments  # the arguments live with the command

    p = sub.add_parser("generate", help="generate text, streamed as it is made, optionally steered")
    add_generate_arguments(p)
    p.set_defaults(fn=_cmd_generate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as err:
        # Bad input (a missing file, an unknown name, a malformed data line): the message says what to fix.
        # INTERP_DEBUG=1 shows the traceback instead.
        if os.environ.get("INTERP_DEBUG"):
            raise
        print(f"interp: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
