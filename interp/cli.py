"""The ``interp`` command.

Each subcommand is a thin shell over a library function, imported only when that subcommand runs so that
``interp models`` does not pay for matplotlib. Studies are found through the ``interp.studies`` entry-point
group, so packages other than this one can register their own.

Every subcommand checks what can be checked before it loads a model (the output location, the data file,
device, dtype and flags), and a user's mistake ends the command with one line, ``interp: error: ...``, and
exit status 2. Which exceptions count as a user's mistake is decided in one place, :func:`user_error`: the
library reports bad input as ``ValueError`` (its own ``CheckpointError``, ``StoreMismatchError``,
``AttentionSpecError``... subclass it), ``KeyError`` (unknown hook or model names) and ``FileNotFoundError``,
and the operating system reports an unusable path as ``FileExistsError``, ``NotADirectoryError``,
``IsADirectoryError``, ``PermissionError`` or another ``OSError`` about a named file, a full disk or a
read-only file system. Everything else (``TypeError``, ``AttributeError``, ``RuntimeError``...) is a bug and
keeps its traceback. ``INTERP_DEBUG=1`` keeps the traceback for every error.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
from collections.abc import Sequence

from interp.arguments import ArgumentParser, non_negative_int, positive_int

_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM}


def _cmd_models(args: argparse.Namespace) -> int:
    from interp.load.catalog import format_families
    from interp.load.packaged import format_packaged_models

    print(format_packaged_models())
    print()
    print(format_families())
    return 0


def _cmd_study(args: argparse.Namespace) -> int:
    from interp.registry import run_study

    return run_study(args.name, args.study_args)


def _cmd_explain(args: argparse.Namespace) -> int:
    from interp.load.instantiate import parse_device, parse_dtype
    from interp.preflight import check_output_file

    check_output_file(args.out, flag="--out", suffixes=(".html", ".htm"), example="explain.html")
    parse_device(args.device)
    parse_dtype(args.dtype)
    if not args.text.strip():
        raise ValueError('the text to explain is empty; pass a sentence, such as "The cat sat on the mat"')
    from interp.report.explain import explain_main

    return explain_main(args)


def _cmd_cache(args: argparse.Namespace) -> int:
    from interp.store import cache_main

    return cache_main(args)


def _cmd_sae(args: argparse.Namespace) -> int:
    from interp.sae.cli import sae_main

    return sae_main(args)


def _cmd_generate(args: argparse.Namespace) -> int:
    from interp.generation.cli import generate_main

    return generate_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="interp", description="See inside a transformer, by name.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "models", help="list the packaged models (and whether each is installed) and the families that load"
    )
    p.set_defaults(fn=_cmd_models)

    p = sub.add_parser("study", help="run a registered study and write its report", add_help=False)
    p.add_argument("name", nargs="?", default=None, help="study name (omit to list them)")
    p.add_argument("study_args", nargs=argparse.REMAINDER, help="arguments passed to the study")
    p.set_defaults(fn=_cmd_study)

    p = sub.add_parser("explain", help="explain one sentence's attention, step by step, as an HTML page")
    p.add_argument("text")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--token", default=None, help="the token to follow (default: the last one)")
    p.add_argument("--layer", type=non_negative_int, default=None, help="the layer shown first (from 0)")
    p.add_argument("--head", type=non_negative_int, default=None, help="the head shown first (from 0)")
    p.add_argument("--out", default="explain.html", help="the HTML file to write")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=_cmd_explain)

    p = sub.add_parser("cache", help="stream a data set through a model into an activation store")
    p.add_argument("model")
    p.add_argument("--data", required=True, help="a text file (one item a line) or JSONL with 'text'")
    p.add_argument("--hooks", required=True, help="hook names or a glob, comma separated")
    p.add_argument("--out", required=True, help="the store folder (new, empty, or this store to resume)")
    p.add_argument("--overwrite", action="store_true", help="replace the activation store already in --out")
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--positions", default="all", help="'all', 'last', or comma-separated indices")
    p.add_argument("--shard-rows", type=positive_int, default=4096)
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=_cmd_cache)

    p = sub.add_parser("sae", help="sparse autoencoders: train one on a model's activations")
    sae_sub = p.add_subparsers(dest="sae_command", required=True)
    t = sae_sub.add_parser("train", help="cache a corpus's activations at a hook and train an SAE on them")
    t.add_argument("model", help="packaged name, Hugging Face folder or .gguf file")
    t.add_argument("--data", required=True, help="text (one item a line), JSONL with 'text', or parquet")
    t.add_argument(
        "--kind",
        default="sae",
        choices=("sae", "transcoder", "skip-transcoder", "clt"),
        help="an SAE at --hook, or transcoders (per layer, with a skip, cross-layer) from MLP input to output",
    )
    t.add_argument("--hook", default=None, help="the hook an SAE reads, e.g. blocks.6.hook_resid_post")
    t.add_argument(
        "--layers", default=None, help="transcoders: layers to train, comma separated (default all)"
    )
    t.add_argument(
        "--input-site", default="ln2.hook_normalized", help="transcoders: the hook read in a block"
    )
    t.add_argument("--output-site", default="hook_mlp_out", help="transcoders: the hook written in a block")
    t.add_argument("--d-sae", type=int, required=True, help="number of latents (features per layer)")
    t.add_argument("--k", type=int, default=None, help="active latents per token (topk, batchtopk)")
    t.add_argument("--out", required=True, help="output folder (activations, checkpoint, sae)")
    t.add_argument("--architecture", default="topk", choices=("topk", "batchtopk", "standard", "jumprelu"))
    t.add_argument("--tokens", type=int, default=None, help="training rows (default: one pass)")
    t.add_argument("--train-batch-size", type=int, default=4096, help="rows per training step")
    t.add_argument("--batch-size", type=int, default=16, help="windows per model forward pass")
    t.add_argument("--context", type=int, default=128, help="tokens per window")
    t.add_argument("--lr", type=float, default=None)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--checkpoint-every", type=int, default=200, help="steps between checkpoints")
    t.add_argument("--shard-rows", type=int, default=8192)
    t.add_argument("--buffer-rows", type=int, default=262144, help="rows shuffled in memory at once")
    t.add_argument(
        "--skip-first", type=int, default=1, help="tokens at the start of each window left out of training"
    )
    t.add_argument("--device", default=None)
    t.add_argument("--dtype", default=None)
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(fn=_cmd_sae)

    from interp.generation.cli import add_generate_arguments  # the arguments live with the command

    p = sub.add_parser("generate", help="generate text, streamed as it is made, optionally steered")
    add_generate_arguments(p)
    p.set_defaults(fn=_cmd_generate)
    importlib.import_module("interp.commands.attribute").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interp`` command line; returns the exit status (2 for a user's mistake)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # a parse error (already printed in one line), or --help
        return exit_.code if isinstance(exit_.code, int) else 0
    try:
        return int(args.fn(args) or 0)
    except KeyboardInterrupt:
        if _debug():
            raise
        print("interp: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        message = user_error(err)
        if message is None or _debug():
            raise
        print(f"interp: error: {message}", file=sys.stderr)
        return 2


def user_error(err: BaseException) -> str | None:
    """The one-line message for an error that is the user's to fix, or ``None`` for a bug."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(err, torch.OutOfMemoryError):
        first = str(err).split(". ")[0].rstrip(".")
        return f"{first}; try a smaller --batch-size, --dtype bfloat16, or a device with more memory"
    if (
        isinstance(err, OSError)
        and err.strerror
        and (err.filename is not None or err.errno in _ENVIRONMENT_ERRNOS)
    ):
        where = f": {err.filename}" if err.filename is not None else ""
        where += f" -> {err.filename2}" if getattr(err, "filename2", None) is not None else ""
        return _one_line(f"{err.strerror}{where}")
    user = (ValueError, KeyError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError)
    if not isinstance(err, (*user, PermissionError)):
        return None
    if isinstance(err, KeyError) and len(err.args) == 1 and isinstance(err.args[0], str):
        return _one_line(err.args[0])  # str(KeyError) would quote the message
    return _one_line(str(err))


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text.strip())


def _debug() -> bool:
    return os.environ.get("INTERP_DEBUG", "") not in ("", "0")


if __name__ == "__main__":
    sys.exit(main())
