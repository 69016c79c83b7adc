"""Atomic file writes: a file under its final name is always complete.

The content goes to a temporary name beside the target, is flushed to disk (fsync), and is then renamed over the
target (``os.replace``, atomic within a folder); the folder is fsynced too, so the rename survives a crash. A
reader therefore sees the old file or the new one, never half of one. A write that raises removes its
temporary file; a process killed mid-write leaves only the temporary file, which the next write of the same
name replaces. Stores, caches and checkpoints all write this way, through :func:`write_atomic`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def tmp_path(path: Path) -> Path:
    """Where ``path`` is written before it is committed, unless the caller names another place."""
    return path.with_name(path.name + ".tmp")


def write_atomic(
    path: Path, write: Callable[[Path], Any], *, tmp: Path | None = None, sync: bool = True
) -> None:
    """Create or replace ``path`` atomically: ``write(tmp)`` writes the content, then it is fsynced and renamed.

    Args:
        path: the file to create or replace; its folder must exist.
        write: writes the whole content to the path it is given (e.g. ``lambda p: p.write_text(text)``).
        tmp: the temporary file, in the same folder (default ``NAME.tmp``); writers that may run at once in
            several processes give each its own.
        sync: fsync the file and its folder. ``False`` keeps the rename atomic against a killed process but
            not against a power cut, for writers of many small files that commit them all with one later
            synced write (``fsync`` costs milliseconds per file).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_atomic(folder / "note.txt", lambda tmp: tmp.write_text("done"))
    >>> (folder / "note.txt").read_text(), sorted(p.name for p in folder.iterdir())
    ('done', ['note.txt'])
    """
    tmp = tmp_path(path) if tmp is None else tmp
    if tmp.parent != path.parent:
        raise ValueError(
            f"the temporary file {tmp} must be in the folder of {path}, or the rename is not atomic"
        )
    try:
        write(tmp)
        if sync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
