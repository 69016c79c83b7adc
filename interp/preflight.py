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
from typing import Any


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


def check_placement(args: Any) -> dict[str, Any]:
    """``interp.load``'s placement keywords from ``--device-map``, ``--max-memory`` and ``--offload-folder``.

    Checked before any model loads: the devices named, the sizes, that the folder can be written, and that
    ``--device`` is not given as well (a device map places the model).

    Returns:
        ``{}`` when no device map was asked for; otherwise ``device_map``, ``max_memory`` and
        ``offload_folder`` for :func:`interp.load`.

    Raises:
        ValueError: one line naming what was wrong (as ``device_map``, ``max_memory``, ``offload_folder``) and
            what would do instead.
    """
    from interp.load.placement_request import check_request

    device_map = getattr(args, "device_map", None)
    max_memory, folder = getattr(args, "max_memory", None), getattr(args, "offload_folder", None)
    if device_map is None:
        if max_memory is not None or folder is not None:
            flag = "--max-memory" if max_memory is not None else "--offload-folder"
            raise ValueError(f"{flag} goes with --device-map; add --device-map auto")
        return {}
    if getattr(args, "device", None) is not None:
        raise ValueError(f"--device {args.device} and --device-map: give one; a device map places the model")
    try:
        check_request(device_map, max_memory, folder)
    except ImportError as err:
        raise ValueError(f"--device-map: {err}") from None
    except TypeError as err:
        raise ValueError(str(err)) from None
    return {"device_map": device_map, "max_memory": max_memory, "offload_folder": folder}
