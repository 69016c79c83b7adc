"""Checks that run before any model is loaded: can the output be written where the user asked?

A command that loads a model and computes for minutes must not discover at the end that its ``--out`` is a
file, sits under a file, or lies somewhere nothing can be created. These checks find that first, touching
nothing the user has: the only reliable test of "can I create a file here" is to create one, so the nearest
existing folder is probed with an empty temporary file that is removed at once (permission bits say nothing
when running as root, and ``/proc`` accepts ``os.access`` but refuses every new file).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def check_output_file(
    path: str | os.PathLike, *, flag: str, suffixes: Iterable[str] = (), example: str = "output"
) -> Path:
    """Check that ``path`` can be written as a file (its folders are created when it is written).

    Args:
        path: the file to be written.
        flag: how the user gave it (``"--out"``), named in messages.
        suffixes: if given, an existing file without one of these suffixes (``".html"``) is refused rather
            than overwritten: it is probably not an earlier output of the same command.
        example: a file name to suggest when ``path`` is a folder.

    Returns:
        The path, with ``~`` expanded.

    Raises:
        ValueError: ``path`` is a folder, an existing file of another kind, under a file, or not writable.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise ValueError(f"{flag} {target} is a folder; name the file to write, such as {target / example}")
    allowed = tuple(s.lower() for s in suffixes)
    if target.exists() and allowed and target.suffix.lower() not in allowed:
        raise ValueError(
            f"{flag} {target} exists and is not a {' or '.join(allowed)} file; it is left untouched: "
            "choose a new file name"
        )
    if target.exists() and not os.access(target, os.W_OK):
        raise ValueError(f"{flag} {target} exists and is not writable; choose another file")
    _check_creatable(target.parent, flag, target)
    return target


def check_output_folder(path: str | os.PathLike, *, flag: str) -> Path:
    """Check that ``path`` is a folder, or can be created as one, and that files can be created in it.

    Whether its contents may be replaced is for the caller to decide.

    Returns:
        The path, with ``~`` expanded.

    Raises:
        ValueError: ``path`` is a file, lies under a file, or nothing can be created there.
    """
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise ValueError(f"{flag} {target} is a file, not a folder; choose a new or empty folder")
    _check_creatable(target, flag, target)
    return target


def _check_creatable(folder: Path, flag: str, target: Path) -> None:
    """Raise unless ``folder`` exists and accepts new files, or its nearest existing ancestor does."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(
            f"{flag} {target}: {existing} is a file, so no folder can be made under it; choose another place"
        )
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".interp-write-check-")
    except OSError as err:
        raise ValueError(
            f"{flag} {target}: cannot create files in {existing} ({err.strerror}); choose a writable place"
        ) from None
    os.close(handle)
    os.unlink(probe)
