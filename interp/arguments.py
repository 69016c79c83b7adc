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
