"""Atomic file writes: a file under its final name is always complete.

The content goes to a temporary name beside the target, is flushed to disk (fsync), and is then renamed over the
target (``os.replace``, atomic within a folder); the folder is fsynced too, so the rename survives a crash. A
reader therefore sees the old file or the new one, never half of one. A write that raises removes its
temporary file; a process killed mid-write leaves only the temporary file, which the next write of the same
name replaces. Stores, caches and checkpoints all write this way, through :func:`write_atomic`.

A file written this way gets the mode any new file gets, ``0o666`` less the process's umask (``0644`` under the
usual ``022``), whatever made the temporary file: safetensors, for one, writes through a temporary of its own
created ``0600``, which the rename would otherwise carry to the target, so one file of a folder would be
private while its siblings are not.

Several files that belong together (a graph's tensors, its JSON and its page) are replaced as one with
:func:`write_together`: every file is written complete beside its target first, then all are renamed in one step
that Ctrl-C cannot split, in the order given, so that the last one (a record of the set) commits it.

A cache that several processes may build at once (a converted checkpoint, a folder of files, a virtual
environment) is built by one of them under a file lock (:func:`locked`), while the others wait and then find it
done: :func:`built_once` builds a folder into a temporary sibling and renames it into place when complete, so
no process sees a half-built folder or has one removed under it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
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
        _stage(tmp, write, sync)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def write_together(folder: Path, files: Mapping[str, Callable[[Path], Any]]) -> None:
    """Create or replace the files ``files`` names in ``folder`` as one change: a reader sees them all old or all
    new, provided it checks the last one, which records the set (a graph folder's record:
    :mod:`interp.circuits.features.graph_folder`).

    Each ``files[name]`` writes the whole content of ``name`` to the path it is given, as for
    :func:`write_atomic`. First every file is written and fsynced under its temporary name (``NAME.tmp``): an
    error or Ctrl-C in this phase removes the temporaries and leaves every old file as it was. Then the files
    are renamed over their targets in the order given, with Ctrl-C held until the last rename is done (it takes
    effect then), and the folder is fsynced. Only a killed process or a power cut can stop the renames part way,
    leaving the files before the last one new and the record old, which is what a reader's check finds.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_together(folder, {"a.txt": lambda p: p.write_text("1"), "set.txt": lambda p: p.write_text("a.txt")})
    >>> sorted(p.name for p in folder.iterdir()), (folder / "a.txt").read_text()
    (['a.txt', 'set.txt'], '1')
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for name, write in files.items():
            path = folder / name
            staged.append((tmp_path(path), path))
            _stage(staged[-1][0], write, sync=True)
        with _interrupts_held():
            for tmp, path in staged:
                os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    fsync_dir(folder)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created, with its folder, if missing) for the block.

    Processes (and threads) that lock the same path run their blocks one at a time; the others wait. The lock
    is the kernel's (``flock``), so a process that is killed lets go of it.

    Raises:
        OSError: the lock file cannot be created (a read-only folder).
    """
    import fcntl  # POSIX: the only platforms the package runs on

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


COMPLETE = ".complete"
"""The file a folder built by :func:`built_once` holds once it is whole, with what the builder recorded."""


def built_once(target: Path, build: Callable[[Path], Any], *, record: str = "") -> Path:
    """``target``, a folder that ``build(folder)`` fills, built once however many processes ask at once.

    A complete folder holds :data:`COMPLETE` (with ``record`` in it) and is never built again. Otherwise the
    caller takes the lock ``TARGET.lock`` (waiting while another process builds), looks again, and builds into
    a new temporary folder beside ``target``, which it renames to ``target`` once complete. A folder left
    incomplete by a killed builder is replaced; the temporary folder of a failed build is removed. ``build`` is
    given the temporary folder: what must name the final place (a virtual environment's scripts) is written
    with ``target``, the name the folder will have.

    >>> folder = Path(tempfile.mkdtemp()) / "cache"
    >>> built_once(folder, lambda tmp: (tmp / "data.txt").write_text("built")) == folder
    True
    >>> (folder / "data.txt").read_text(), built_once(folder, lambda tmp: 1 / 0) == folder
    ('built', True)
    """
    if (target / COMPLETE).is_file():
        return target
    with locked(target.with_name(target.name + ".lock")):
        if (target / COMPLETE).is_file():
            return target
        building = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
        try:
            build(building)
            (building / COMPLETE).write_text(record)
            os.chmod(building, 0o777 & ~umask())  # a new folder's mode, not mkdtemp's private 0700
            if target.exists():
                shutil.rmtree(target)  # left incomplete by a builder that was killed
            building.rename(target)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return target


def _stage(tmp: Path, write: Callable[[Path], Any], sync: bool) -> None:
    """``write(tmp)``, then give ``tmp`` the mode a new file gets and (with ``sync``) flush it to disk."""
    tmp.unlink(missing_ok=True)  # a temporary left by a killed write keeps its mode otherwise
    write(tmp)
    os.chmod(tmp, 0o666 & ~umask())
    if sync:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_UMASK_LOCK = threading.Lock()


def umask() -> int:
    """The process's umask, read without changing it where the system tells (Linux's ``/proc``); elsewhere
    set and restored at once, under a lock, since ``os.umask`` can only be read by setting it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block ends, then act on it: a few renames are never split by it. Outside
    the main thread, where no signal handler can be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, Any]] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: caught.append((number, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        if callable(previous):
            previous(*caught[0])
        elif previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)


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
