"""Command-line parsing shared by ``interp`` and its studies: exact flags, one-line errors.

argparse accepts any unambiguous prefix of a flag by default, so ``--model`` is silently read as ``--models``
by a parser that has only the latter; here a flag must be spelt out. A parse error is one line that names the
problem and where the help is, instead of the usage block followed by the error.
"""

from __future__ import annotations

import argparse
import json
import math
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
    """An argparse ``type``: an integer that is 0 or more (a layer, a head, a count of retries)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give 0 or more")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type``: a finite number above 0 (seconds to wait, a rate); ``nan`` and ``inf`` are refused.

    >>> positive_float("2.5")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a finite number above 0") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}; give a finite number above 0")
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
    """``--device``, ``--dtype``, the placement flags (and ``--quiet``), worded the same for every command and study."""
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps ... (default: cpu)")
    parser.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default: float32)")
    add_placement_arguments(parser)
    if quiet:
        parser.add_argument("--quiet", action="store_true", help="print no progress")


def add_placement_arguments(parser: argparse.ArgumentParser) -> None:
    """``--device-map``, ``--max-memory`` and ``--offload-folder``: a model spread over devices with accelerate.

    Read them back with :func:`interp.preflight.check_placement`, which turns them into ``interp.load``'s
    keywords after checking them.
    """
    parser.add_argument(
        "--device-map",
        type=device_map_arg,
        default=None,
        help="'auto' (blocks fill the GPUs, then the CPU, then disk; needs accelerate) or a JSON object of "
        "module -> device, instead of --device (default: none, the model on one device)",
    )
    parser.add_argument(
        "--max-memory",
        type=memory_budgets,
        default=None,
        help="with --device-map auto: the most each device may hold, e.g. 0=20GiB,1=20GiB,cpu=60GiB "
        "(default: what each device has free)",
    )
    parser.add_argument(
        "--offload-folder",
        default=None,
        help="with --device-map: where the weights placed on disk go (default: none; needed when any go to disk)",
    )


def device_map_arg(text: str) -> str | dict:
    """An argparse ``type``: ``auto``, or a JSON object such as ``{"embed": 0, "blocks.0": 0, "blocks.1": "cpu"}``."""
    if text == "auto":
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"{text!r}; give 'auto' or a JSON object of module -> device, such as "
            '\'{"embed": "cpu", "blocks.0": "cpu", "blocks.1": "disk", "ln_final": "cpu", "unembed": "cpu"}\''
        )
    return value


def memory_budgets(text: str) -> dict[int | str, str]:
    """An argparse ``type``: ``0=20GiB,cpu=60GiB`` -> ``{0: "20GiB", "cpu": "60GiB"}`` (GPUs by index)."""
    budgets: dict[int | str, str] = {}
    for part in text.split(","):
        device, sep, size = part.strip().partition("=")
        if not sep or not device or not size:
            raise argparse.ArgumentTypeError(
                f"{part.strip()!r} in {text!r}; write DEVICE=SIZE pairs, comma separated, e.g. 0=20GiB,cpu=60GiB"
            )
        budgets[int(device) if device.isdigit() else device] = size
    return budgets
