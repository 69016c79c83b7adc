"""The ``interp`` command: a dispatcher over :mod:`interp.commands`.

Each subcommand is a module of :mod:`interp.commands` (its arguments, its pre-flight, the library call),
whose heavy imports happen only when it runs, so that ``interp models`` does not pay for matplotlib. Studies
are found through the ``interp.studies`` entry-point group, so packages other than this one can register
their own.

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
import os
import re
import sys
from collections.abc import Sequence

from interp.arguments import ArgumentParser, HelpFormatter
from interp.commands import (
    attribute,
    autointerp,
    cache,
    dashboards,
    explain,
    generate,
    models,
    sae,
    serve,
    study,
)

COMMANDS = (models, study, explain, cache, sae, generate, attribute, dashboards, autointerp, serve)
"""The subcommands' modules, in the order ``interp --help`` lists them."""

_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM}


def build_parser() -> argparse.ArgumentParser:
    """The ``interp`` parser, with each subcommand of :data:`COMMANDS` registered by its module."""
    parser = ArgumentParser(
        prog="interp",
        description="See inside a transformer, by name. 'interp COMMAND --help' describes each command.",
        formatter_class=HelpFormatter,
        epilog='example:\n  interp explain "The cat sat on the mat because it was tired" --token it',
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``interp`` command line; returns the exit status (2 for a user's mistake)."""
    try:
        args = _parse(build_parser(), argv)
    except SystemExit as exit_:  # a parse error (already printed in one line), or --help
        return exit_.code if isinstance(exit_.code, int) else 0
    try:
        return int(args.fn(args) or 0)
    except SystemExit as exit_:  # a study's own parser refused its flags (already printed in one line)
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
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


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, leaving a flag the subcommand does not know to the subcommand's parser to refuse, so that the
    message points to its own ``--help``."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        where = getattr(args, "command_parser", parser)
        where.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


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
