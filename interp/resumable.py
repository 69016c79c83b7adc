"""A folder that a long run fills and a rerun of the same run continues: claimed by the run's identity.

Three kinds of run keep their work this way: an activation store (``interp cache``), a dictionary's dashboards
(``interp dashboards``) and a training run (``interp sae train``). Each writes a record naming the run (its
*identity*: model, data, settings) before any work, and each rerun asks the same question of the folder:

- absent, or empty: the run is **new** (the record is written);
- holding the record of this run: it **resumes**, or it is **complete** and nothing is left to do;
- holding the record of another run: refused, naming every field that differs, its old and new value, and
  what to do instead; nothing in the folder is touched;
- holding other files and no record: refused (they are someone's, and nothing here overwrites them).

How far a run got also decides what a rerun must share with it: a store with no committed shard, or a
training run that cached and trained nothing, holds nothing worth keeping, so any run may take it over
(:attr:`Stage.compared` lists the fields compared, none for such a folder). :func:`claim` is that decision,
once, for every kind; a :class:`Layout` says where each kind keeps its record and how it speaks of itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from interp.atomic import write_atomic

State = Literal["new", "resume", "complete"]


@dataclass(frozen=True)
class Stage:
    """How far the run recorded in a folder got.

    Attributes:
        state: ``"new"`` (nothing worth keeping), ``"resume"`` or ``"complete"``.
        compared: the identity fields a rerun must share with it (``None``: every field; ``()``: none).
    """

    state: State
    compared: Sequence[str] | None = None


@dataclass(frozen=True)
class Layout:
    """How one kind of run keeps its record, and how its messages speak of it.

    Attributes:
        record: the file, in the folder, that names the run (``run.json``, ``meta.json``).
        what: what the folder holds, for messages (``"dashboards"``, ``"an activation store"``).
        other: what it holds when it is another run's (``"another run's dashboards"``, ``"another run"``).
        remedy: what to do instead when the folder holds another run.
        elsewhere: what to do instead when it holds other files and no record.
        key: where the identity sits in the record (``None``: the record is the identity).
        flag: the flag that named the folder (``"--out"``), or ``None`` for a library call.
        error: the exception raised (a subclass of ``ValueError``).
        ignore: entries that do not make a folder hold "other files" (a record's interrupted temporary file).
        describe: ``(field, old, new) -> str`` for fields that read better otherwise, or ``None`` to use the
            plain ``field was OLD, now NEW``.
    """

    record: str
    what: str
    other: str
    remedy: str
    elsewhere: str = "choose a new or empty folder"
    key: str | None = None
    flag: str | None = "--out"
    error: type[ValueError] = ValueError
    ignore: tuple[str, ...] = ()
    describe: Callable[[str, Any, Any], str | None] | None = None

    def named(self, folder: Path) -> str:
        """The folder as the user named it: ``--out run/`` or the bare path."""
        return f"{self.flag} {folder}" if self.flag else str(folder)


@dataclass(frozen=True)
class Claim:
    """What :func:`claim` found: the state, and the record already there (``None`` for a new folder)."""

    state: State
    record: dict[str, Any] | None


def read_record(folder: Path, layout: Layout) -> dict[str, Any] | None:
    """The folder's record, or ``None`` when there is none.

    Raises:
        layout.error: the record is not a JSON object.
    """
    path = folder / layout.record
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise layout.error(
            f"{layout.named(folder)}: {path} is not valid JSON ({err}); delete {folder} to start over"
        ) from None
    if not isinstance(record, dict) or (
        layout.key is not None and not isinstance(record.get(layout.key), dict)
    ):
        raise layout.error(
            f"{layout.named(folder)}: {path} is not the record of {layout.what}; give another folder"
        )
    return record


def claim(
    folder: str | Path,
    identity: Mapping[str, Any],
    layout: Layout,
    *,
    stage: Callable[[dict[str, Any]], Stage],
    write: Callable[[], dict[str, Any]] | None = None,
) -> Claim:
    """Check ``folder`` for a run of ``identity``; for a new run, write the record ``write()`` gives.

    Args:
        folder: the run's folder.
        identity: this run's identity (JSON values).
        layout: where the record is kept and how messages name things.
        stage: how far the run in the folder got, from its record (see :class:`Stage`).
        write: the record of a new run; ``None`` writes nothing (a check before any work, or a caller that
            writes its record itself).

    Raises:
        layout.error: the folder is a file, holds other files and no record, or holds another run (every field
            that differs named, with its old and new value).
    """
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise layout.error(f"{layout.named(folder)} is a file, not a folder; choose a new or empty folder")
    record = read_record(folder, layout)
    if record is None:
        others = (
            sorted(p.name for p in folder.iterdir() if p.name not in layout.ignore) if folder.is_dir() else []
        )
        if others:
            shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            raise layout.error(
                f"{layout.named(folder)} is not empty and holds no {layout.record} (it holds {shown}), so it is "
                f"not {layout.what}; {layout.elsewhere}"
            )
        if write is not None:
            _write(folder, layout, write())
        return Claim("new", None)
    found = stage(record)
    stored = record if layout.key is None else record[layout.key]
    problems = differences(stored, identity, found.compared, layout.describe)
    if problems:
        raise layout.error(
            f"{layout.named(folder)} holds {layout.other} ({'; '.join(problems)}); {layout.remedy}"
        )
    if found.state == "new" and write is not None:
        _write(folder, layout, write())
    return Claim(found.state, record)


def differences(
    stored: Mapping[str, Any],
    wanted: Mapping[str, Any],
    fields: Sequence[str] | None = None,
    describe: Callable[[str, Any, Any], str | None] | None = None,
) -> list[str]:
    """One phrase per field of ``fields`` (``None``: all) in which ``stored`` and ``wanted`` differ:
    ``field was OLD, now NEW``; within a nested record, each differing leaf by its dotted path
    (``dictionary.fingerprint was '3f2a9c1b0e4d…', now '81bb…'``)."""
    keys = sorted(set(stored) | set(wanted)) if fields is None else list(fields)
    out = []
    for key in keys:
        old, new = stored.get(key), wanted.get(key)
        if old == new:
            continue
        said = describe(key, old, new) if describe is not None else None
        out.extend([said] if said is not None else _leaves(key, old, new))
    return out


def _leaves(path: str, old: Any, new: Any) -> list[str]:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return [
            phrase
            for key in sorted(set(old) | set(new), key=str)
            if old.get(key) != new.get(key)
            for phrase in _leaves(f"{path}.{key}", old.get(key), new.get(key))
        ]
    return [f"{path} was {short(old)}, now {short(new)}"]


def short(value: Any, limit: int = 80) -> str:
    """``value`` as a reader sees it in one line: a fingerprint cut to 12 characters, anything long cut."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return repr(value[:12] + "…")
    text = (
        repr(value)
        if isinstance(value, (str, int, float, bool)) or value is None
        else json.dumps(value, default=str)
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _write(folder: Path, layout: Layout, record: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    write_atomic(folder / layout.record, lambda tmp: tmp.write_text(text, encoding="utf-8"))
