"""Command-line parsing shared by ``interp`` and its studies: exact flags, one-line errors.

argparse accepts any unambiguous prefix of a flag by default, so ``--model`` is silently read as ``--models``
by a parser that has only the latter; here a flag must be spelt out. A parse error is one line that names the
problem and where the help is, instead of the usage block followed by the error.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` without prefix matching (``allow_abbrev=False``) and with one-line errors.

    Subparsers made with ``add_subparsers().add_parser`` are of this class too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        """argparse names a ``type`` that raised ``ValueError`` by its function name (``invalid _count
        value``); say what the value was and why it was refused instead."""
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as err:
            cause = err.__context__
            if action.type in (int, float) or not isinstance(cause, (ValueError, TypeError)):
                raise
            reason = str(cause) or "not a value this flag takes"
            raise argparse.ArgumentError(action, f"invalid value {arg_string!r}: {reason}") from None

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see '{self.prog} --help'\n")


def non_negative_int(text: str) -> int:
    """An argparse ``type``: an integer that is 0 or more (a layer, a head)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give an index from 0")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer that is 1 or more (a batch size, a row count)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}; it must be at least 1")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that gives every flag's default: ``(default: X)`` is added where the help text does not say it.

    A flag whose default is ``None`` must say in its own words what happens when it is not given (the
    formatter cannot know); a switch (``store_true``) reads ``(default: off)``. The description and the
    example below the flags keep their line breaks.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default is argparse.SUPPRESS:
            return text
        if action.required:
            return f"{text} (required)"
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        if action.default is None:
            return text
        return f"{text} (default: %(default)s)"


def add_command(
    sub: argparse._SubParsersAction, name: str, *, summary: str, description: str, example: str
) -> ArgumentParser:
    """A subcommand's parser: one line for the list of commands, a description and an example for its help.

    Args:
        sub: From ``parser.add_subparsers()``.
        name: The subcommand's name.
        summary: One line, shown in ``interp --help``.
        description: What the command does, shown first in its ``--help``.
        example: One command line that works, shown last in its ``--help``.
    """
    parser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}",
        formatter_class=HelpFormatter,
    )
    parser.set_defaults(command_parser=parser)  # where ``interp.cli`` sends a flag this command does not know
    return parser


def add_device_arguments(parser: argparse.ArgumentParser, *, quiet: bool = True) -> None:
    """``--device``, ``--dtype`` (and ``--quiet``), worded the same for every command and study."""
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps ... (default: cpu)")
    parser.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default: float32)")
    if quiet:
        parser.add_argument("--quiet", action="store_true", help="print no progress")
