"""The output folder of a cache run: what it holds, whether this run may write there, and cleaning up.

A folder is absent or empty, holds an activation store (``meta.json``, ``shard_NNNNN.safetensors``,
``rank{r}/`` subfolders of those), or holds other files. Other files are never deleted or overwritten:
a folder with other files and no ``meta.json`` is refused, and a store's folder keeps any files a user put
beside it.

- A store **without a committed shard** (a run that stopped before its first shard: a bad position, a data
  line without text, a kill) holds nothing worth keeping, so any run may take the folder over. A run that
  fails that early removes what it wrote, folders included.
- A store **with shards** is continued by a run with the same identity (model, hooks, positions, layout,
  data) and refused for any other, unless ``overwrite`` is given: then the store's own files are deleted
  (the others stay) and the run starts over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp import distributed
from interp.resumable import Layout, Stage
from interp.resumable import claim as claim_folder
from interp.store.files import write_json
from interp.store.meta import META, StoreMismatchError, describe_difference, read_meta

_STORE_FILE = re.compile(r"(meta\.json|shard_\d{5}\.safetensors)(\.tmp)?")
_RANK_DIR = re.compile(r"rank\d+")


@dataclass(frozen=True)
class FolderState:
    """What a folder holds.

    Attributes:
        meta: its ``meta.json``, or ``None``.
        shards: committed shard files, in the folder and its ``rank{r}/`` subfolders.
        store_entries: the store's own files and rank folders (names relative to the folder).
        other: every other entry.
    """

    meta: dict[str, Any] | None = None
    shards: int = 0
    store_entries: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    @property
    def unstarted(self) -> bool:
        """A store that no shard was committed to: nothing in it is worth keeping."""
        return self.meta is not None and not self.meta.get("complete") and self.shards == 0


def inspect(folder: Path) -> FolderState:
    """Sort the entries of ``folder`` into the store's own and the others; read its ``meta.json``."""
    if not folder.is_dir():
        return FolderState()
    meta, shards, own, other = read_meta(folder), 0, [], []
    for entry in sorted(folder.iterdir()):
        if entry.is_file() and _STORE_FILE.fullmatch(entry.name):
            own.append(entry.name)
            shards += entry.name.endswith(".safetensors")
        elif entry.is_dir() and _RANK_DIR.fullmatch(entry.name) and _only_store_files(entry):
            own.append(entry.name)
            shards += sum(1 for p in entry.glob("shard_*.safetensors"))
        else:
            other.append(entry.name)
    return FolderState(meta, shards, own, other)


LAYOUT = Layout(
    record=META,
    what="an activation store",
    other="another run's activation store",
    remedy="write to another output folder, or replace it with overwrite=True (interp cache --overwrite)",
    key="identity",
    flag=None,
    error=StoreMismatchError,
    ignore=(META + ".tmp",),
    describe=describe_difference,
)
"""How a store keeps its record (:mod:`interp.resumable`): ``meta.json``, the identity under ``identity``."""


def check_folder(
    folder: Path, identity: dict[str, Any], *, overwrite: bool = False, keys: list[str] | None = None
) -> FolderState:
    """Raise unless a run with ``identity`` may write to ``folder``; writes nothing.

    Args:
        folder: the store folder.
        identity: this run's identity (see :func:`interp.store.cache.cache_activations`).
        overwrite: an existing store with shards may be replaced.
        keys: compare only these identity fields (a check made before the model is loaded knows only some).

    Raises:
        StoreMismatchError: ``folder`` is a file, holds other files and no store, or holds a different store
            with shards.
    """
    state = inspect(folder)  # reads meta.json: one that is not a store's is refused here

    def stage(record: dict[str, Any]) -> Stage:
        if overwrite or state.unstarted:
            return Stage("new", ())
        return Stage("complete" if record.get("complete") else "resume", keys)

    claim_folder(folder, identity, LAYOUT, stage=stage)
    return state


def claim(folder: Path, identity: dict[str, Any], *, create: bool, overwrite: bool = False) -> bool:
    """Check ``folder`` (every rank), then on the creating rank start the store's ``meta.json``.

    An unstarted store, or any store when ``overwrite`` is given, is removed first (its own files only).

    Returns:
        Whether this call wrote a new ``meta.json`` (so that a run failing before its first shard can
        remove it again with :func:`discard_unstarted`).
    """
    state = check_folder(folder, identity, overwrite=overwrite)
    replace = state.meta is not None and (overwrite or state.unstarted)
    distributed.barrier()  # every rank has checked before anyone writes
    wrote = False
    if create and (state.meta is None or replace):
        if replace:
            remove_store(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / META, {"identity": identity, "complete": False, "shards": []})
        wrote = True
    distributed.barrier()  # no rank reads the folder while it is being replaced
    return wrote


def remove_store(folder: Path) -> None:
    """Delete the store's own files and rank folders from ``folder``; every other file stays."""
    for name in inspect(folder).store_entries:
        path = folder / name
        if path.is_dir():
            for child in path.iterdir():
                child.unlink()
            path.rmdir()
        else:
            path.unlink()


def discard_unstarted(folder: Path, created: Path | None) -> None:
    """After a failed run: remove the store if no shard was committed, and the folders the run created.

    Args:
        folder: the store folder.
        created: the outermost folder the run created (``folder`` or an ancestor), or ``None``.
    """
    if not folder.is_dir() or inspect(folder).shards:
        return
    remove_store(folder)
    if created is None:
        return
    current = folder
    while True:
        if any(current.iterdir()):
            return
        current.rmdir()
        if current == created:
            return
        current = current.parent


def first_missing(folder: Path) -> Path | None:
    """The outermost of ``folder`` and its ancestors that does not exist yet (``None``: it exists)."""
    if folder.exists():
        return None
    missing = folder
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    return missing


def _only_store_files(folder: Path) -> bool:
    return all(p.is_file() and _STORE_FILE.fullmatch(p.name) for p in folder.iterdir())
