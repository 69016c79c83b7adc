"""Checks that run before any model is loaded: can the output be written where the user asked?

A command that loads a model and computes for minutes must not discover at the end that its ``--out`` is a
file, sits under a file, or lies somewhere nothing can be created. These checks find that first, touching
nothing the user has: the only reliable test of "can I create a file here" is to create one, so the nearest
existing folder is probed with an empty temporary file that is removed at once (permission bits say nothing
when running as root, and ``/proc`` accepts ``os.access`` but refuses every new file).

An activation store given as input is checked once, here (:func:`check_store`): a store, of every position, with
rows, and, once they are known, holding the dictionary's input hooks and written by the model.

Every command that writes into a folder follows one rule for what it may replace there,
:func:`check_owned`: it replaces only what its own record in the folder says an earlier run of it wrote, and
refuses, by name and before any work, any other entry of a name it would write.
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


def check_owned(
    folder: str | os.PathLike,
    writes: Iterable[str] | None,
    owned: Iterable[str] | bool,
    *,
    flag: str,
    command: str,
    record: str,
) -> Path:
    """The one rule for what a command may replace in its output folder; raises before any work, touches nothing.

    A command knows what an earlier run of it wrote in a folder from its *record* there (a graph's
    ``graph-manifest.json``, a report's ``manifest.json``, dashboards' and training runs' ``run.json``). An
    entry of a name the command writes is the command's to replace only if the record lists it (a folder: every
    file under it); any other such entry is someone else's, and is refused, named in one line, and left as it
    is. Entries of names the command does not write are never touched.

    Args:
        folder: the output folder (it need not exist).
        writes: the entries (paths relative to ``folder``) the command creates or replaces; ``None`` when the
            command owns the whole folder (a training run), so that every entry in it counts.
        owned: the files the record lists (paths relative to ``folder``), ``()`` or ``False`` where there is no
            record, or ``True`` for a record that claims the whole folder.
        flag: how the user gave the folder (``"--out"``), for the message.
        command: the command (``"interp attribute"``), for the message.
        record: the record's file name, for the message.

    Returns:
        The folder, with ``~`` expanded.

    Raises:
        FileExistsError: the folder holds entries the command would write but did not write; the message
            names them, the record, and what to do.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "index.html").write_text("my page")
    >>> check_owned(folder, ["index.html", "graph.json"], (), flag="--out", command="interp attribute",
    ...             record="graph-manifest.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    FileExistsError: --out ... holds index.html, which interp attribute did not write (there is no ...); ...
    """
    target = Path(folder).expanduser()
    if owned is True or not target.is_dir():
        return target
    listed = set() if owned is False else set(owned)
    names = sorted(p.name for p in target.iterdir()) if writes is None else list(writes)
    foreign = [found for name in names for found in _foreign(target, name, listed)]
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        why = f"{record} there does not list them" if (target / record).is_file() else f"there is no {record}"
        raise FileExistsError(
            f"{flag} {target} holds {shown}, which {command} did not write ({why}); they are left untouched: "
            "move them, or choose a new or empty folder"
        )
    return target


def _foreign(folder: Path, name: str, listed: set[str]) -> list[str]:
    """What of entry ``name`` of ``folder`` is not ``listed``: nothing, the entry itself, or the files under a
    folder that are not listed (named by their paths in ``folder``)."""
    path = folder / name
    if not path.exists() and not path.is_symlink():
        return []
    if path.is_dir() and not path.is_symlink():
        files = sorted(p.relative_to(folder).as_posix() for p in path.rglob("*") if not p.is_dir())
        return [f for f in files if f not in listed]
    return [] if name in listed else [name]


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


def check_device(value: str | None, study: str = "this", cpu_only: str | None = None):
    """The ``torch.device`` that ``--device`` names, if this torch can compute on it here; ``None`` for none.

    Parsing is not enough (``cuda:3`` parses on a one-GPU machine), so an empty tensor is made on it.

    Args:
        value: What the user gave, or ``None``.
        study: The command's name, for the message of a ``cpu_only`` command.
        cpu_only: If given, the command runs on the CPU only, for this reason.

    Raises:
        ValueError: Not a device, one this torch cannot use here, or not the CPU for a CPU-only command.
    """
    import torch

    from interp.load.instantiate import parse_device

    device = parse_device(value)
    if device is None:
        return None
    if cpu_only is not None and device.type != "cpu":
        raise ValueError(
            f"the {study} study runs on the CPU only ({cpu_only}); got --device {value}; drop --device"
        )
    try:
        torch.empty(0, device=device)
    except Exception as err:  # torch raises AssertionError, RuntimeError or ValueError, by build and device
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"--device {value} is not available here: {reason} ({_devices()}); use --device cpu"
        ) from err
    return device


def check_dtype(value: str | None, study: str = "this", cpu_only: str | None = None):
    """The floating ``torch.dtype`` that ``--dtype`` names; ``None`` for none.

    Raises:
        ValueError: Not a floating torch dtype, or not float32 for a command that runs in float32 only.
    """
    import torch

    from interp.load.instantiate import parse_dtype

    try:
        dtype = parse_dtype(value)
    except ValueError as err:
        raise ValueError(str(err).replace("dtype=", "--dtype ", 1)) from None
    if cpu_only is not None and dtype not in (None, torch.float32):
        raise ValueError(
            f"the {study} study runs in float32 only ({cpu_only}); got --dtype {value}; drop --dtype"
        )
    return dtype


def find_model(name_or_path: str, flag: str | None = None) -> Path:
    """The checkpoint a model name or path points to, found without reading it.

    Args:
        name_or_path: a packaged name, a folder or a file.
        flag: the flag that gave it (``"--explainer"``), named first in the message where a command has several.

    Raises:
        FileNotFoundError: A packaged model whose package is not installed (the message gives the command
            that installs it), or no file or folder at the path.
    """
    from interp.load import PACKAGED_MODELS
    from interp.load.packaged import packaged_path

    if name_or_path in PACKAGED_MODELS:
        return packaged_path(name_or_path)
    path = Path(name_or_path).expanduser()
    if not path.exists():
        given = f"{flag}: no model {name_or_path!r}" if flag else f"no model {name_or_path!r}"
        raise FileNotFoundError(
            f"{given}: it is not a packaged model ({', '.join(sorted(PACKAGED_MODELS))}) "
            "and no file or folder is there; models are never downloaded, so pass a local path"
        )
    return path


def check_command(
    *,
    out: str | os.PathLike | None = None,
    out_file: tuple[Iterable[str], str] | None = None,
    device: str | None = None,
    dtype: str | None = None,
    model: str | None = None,
    data: str | os.PathLike | None = None,
) -> None:
    """The pre-flight every ``interp`` command runs before it loads anything, in one order.

    The output first (so that nothing is computed for a place that cannot hold it), then the device, the
    dtype, the model (found, not read) and the data file (there, and a file).

    Args:
        out: The ``--out`` of the command.
        out_file: ``(suffixes, example)`` when ``--out`` is a file (see :func:`check_output_file`); without it
            ``--out`` is a folder (see :func:`check_output_folder`).
        device: ``--device``.
        dtype: ``--dtype``.
        model: The model name or path.
        data: ``--data``.

    Raises:
        ValueError: The first of these that is unusable, in one line that says what would do instead.
        FileNotFoundError: The model or the data file is not there.
    """
    if out is not None and out_file is not None:
        suffixes, example = out_file
        check_output_file(out, flag="--out", suffixes=suffixes, example=example)
    elif out is not None:
        check_output_folder(out, flag="--out")
    check_device(device)
    check_dtype(dtype)
    if model is not None:
        find_model(model)
    if data is not None:
        path = Path(data).expanduser()
        if path.is_dir():
            raise ValueError(f"--data {path} is a folder; pass a data file")
        if not path.is_file():
            raise FileNotFoundError(f"--data {path} does not exist")


def _devices() -> str:
    import torch

    if torch.version.cuda is None and not torch.cuda.is_available():
        return "this torch is a CPU-only build"
    if not torch.cuda.is_available():
        return "this torch has CUDA but sees no GPU"
    return (
        f"this torch sees {torch.cuda.device_count()} GPU(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}"
    )


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


def check_store(
    store: Any,
    *,
    flag: str = "--store",
    hooks: Iterable[str] = (),
    model: Any = None,
    need: str = "dashboards show each example in its context",
):
    """The activation store at ``store`` (a folder, or an :class:`~interp.store.ActivationStore`), checked for a
    pass that reads every position of each item: dashboards, and the top contexts an attribution graph shows.

    Called before the model loads with the folder alone (there, a store, of every position, with rows), and
    again with the dictionary's input ``hooks`` and the ``model`` once they are known.

    Args:
        store: the folder, or the store.
        flag: how the user named it, for messages.
        hooks: hooks the store must hold (the dictionary's input hooks).
        model: the model that must have written it (compared by its weights' fingerprint).
        need: why every position is needed, for the message of a store that kept fewer.

    Returns:
        The :class:`~interp.store.ActivationStore`.

    Raises:
        FileNotFoundError: not an activation store. ValueError: one that keeps only some positions, holds no
            rows yet, lacks one of ``hooks``, or was written by another model; each in one line naming the
            store and what would do.
    """
    from interp.store import ActivationStore
    from interp.store.meta import META, model_fingerprint

    if not isinstance(store, ActivationStore):
        folder = Path(store).expanduser()
        if not (folder / META).is_file():
            raise FileNotFoundError(
                f"{flag} {folder} is not an activation store (no {META}); write one with interp cache MODEL "
                "--data FILE --hooks ... --positions all --out DIR"
            )
        store = ActivationStore(folder)
    positions = store.meta["identity"].get("positions")
    if positions != "all":
        raise ValueError(
            f"{flag} {store.folder} keeps positions {positions!r}; {need}, so it needs every position "
            "(interp cache ... --positions all)"
        )
    if len(store) == 0:
        raise ValueError(f"{flag} {store.folder} holds no rows yet; let interp cache commit a shard first")
    hooks = sorted(set(hooks))
    missing = [h for h in hooks if h not in store.hook_names]
    if missing:
        raise ValueError(
            f"{flag} {store.folder} has no rows of {missing}, which the dictionary reads; it holds "
            f"{store.hook_names}. Cache them: interp cache MODEL --data FILE --hooks '{','.join(hooks)}' "
            "--positions all --out DIR"
        )
    if model is not None:
        stored = store.meta["identity"]["model"]
        if stored.get("fingerprint") != model_fingerprint(model):
            raise ValueError(
                f"{flag} {store.folder} was written by model {stored.get('name') or 'unnamed'} (fingerprint "
                f"{str(stored.get('fingerprint'))[:12]}), not by the model given; pass the model it was cached "
                "with, or cache the store again with this one"
            )
    return store
