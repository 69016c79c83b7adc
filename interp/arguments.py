"""Command-line parsing shared by ``interp`` and its studies: exact flags, one-line errors.

argparse accepts any unambiguous prefix of a flag by default, so ``--model`` is silently read as ``--models``
by a parser that has only the latter; here a flag must be spelt out. A parse error is one line that names the
problem and where the help is, instead of the usage block followed by the error.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` without prefix matching (``allow_abbrev=False``) and with one-line errors.

    Subparsers made with ``add_subparsers().add_parser`` are of this class too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

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
        "module -> device, instead of --device",
    )
    parser.add_argument(
        "--max-memory",
        type=memory_budgets,
        default=None,
        help="with --device-map auto: the most each device may hold, e.g. 0=20GiB,1=20GiB,cpu=60GiB",
    )
    parser.add_argument(
        "--offload-folder", default=None, help="with --device-map: where the weights placed on disk go"
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
