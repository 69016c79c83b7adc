"""A graph folder's files are written as one set, and only over an earlier graph's files.

``AttributionGraph.save`` writes ``graph.safetensors``, ``SLUG.json``, ``graph-metadata.json`` and ``index.html``
together: a reader must see the old set or the new one, never the new tensors beside the old page. Two ways
were open, writing a new folder beside and renaming it over the old one, or a record written last that readers
check; this is the second, because a graph folder is not the graph's alone: dashboards are linked into its
``features/``, other graphs of the folder are listed in ``graph-metadata.json`` with their ``SLUG.json``,
explanations are written into its files and a user may keep files there, so it cannot be replaced whole; a
server started in the folder (``python -m http.server``, circuit-tracer's) would go on serving the renamed old
folder; and no portable call swaps two folders, so there would be a moment with no folder at all.

The protocol:

- every save draws a *generation* (a random id) and writes it into the files a reader checks:
  ``graph.safetensors``'s metadata and ``SLUG.json``'s ``interp`` extension (so ``index.html``'s embedded copy
  of the file carries it too);
- the files are written complete beside their targets, then renamed over them in one step that Ctrl-C cannot
  split, and :data:`MANIFEST` last (:func:`interp.atomic.write_together`): ``{"format", "generation", "files":
  {name: generation}}``, every file a save of this folder wrote, with the generation of the save that wrote it;
- a reader (:meth:`AttributionGraph.load`, a ``--subgraph`` graph file) checks that the file it read carries
  the generation the record lists for it (:func:`check_generation`). Only a killed process can stop the
  renames part way; the file it left new under the old record is refused, in one line, rather than read as
  part of a set it does not belong to.

The record is also what makes a file this package's to replace (:func:`interp.preflight.check_owned`): a save
replaces the files the record lists and refuses, before any work, an ``index.html``, ``SLUG.json`` or
``graph.safetensors`` it did not write (a folder written before the record existed counts as ours when its
``graph.safetensors`` is an interp graph). ``graph-metadata.json`` is a list circuit-tracer writes too: a save
adds its graph to it, keeping the other entries, and refuses a file of that name that is not such a list.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from interp.atomic import write_together

MANIFEST = "graph-manifest.json"
FORMAT = "interp-graph-folder/1"
GRAPH_FILE = "graph.safetensors"
METADATA_FILE = "graph-metadata.json"
PAGE = "index.html"
COMMAND = "interp attribute"
"""The command named in a refusal: it writes graph folders (through :meth:`AttributionGraph.save`)."""


def new_generation() -> str:
    """A fresh id for one save's files."""
    return secrets.token_hex(16)


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The folder's record, or ``None`` when it has none.

    Raises:
        ValueError: a file of that name that is not a graph folder's record.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        record = None
    if (
        not isinstance(record, dict)
        or record.get("format") != FORMAT
        or not isinstance(record.get("files"), dict)
    ):
        raise ValueError(
            f"{path} is not the record of a graph folder (format {FORMAT}); it is left untouched: move it, or "
            "choose another folder"
        )
    return record


def owned(folder: str | os.PathLike[str]) -> set[str]:
    """The files of ``folder`` that saves of a graph wrote: those its record lists, or, in a folder written
    before the record existed, ``graph.safetensors`` (when it is an interp graph), ``index.html`` and the
    ``SLUG.json`` of each graph ``graph-metadata.json`` lists."""
    folder = Path(folder)
    record = read_manifest(folder)
    if record is not None:
        return {*record["files"], MANIFEST}
    if not _is_interp_graph(folder / GRAPH_FILE):
        return set()
    slugs = [g.get("slug") for g in _listing(folder) or [] if isinstance(g, dict)]
    return {GRAPH_FILE, PAGE, *(f"{s}.json" for s in slugs if isinstance(s, str))}


def check_folder(folder: str | os.PathLike[str], slug: str, flag: str = "--out") -> Path:
    """Raise unless a graph of ``slug`` may be saved into ``folder`` (see the module docstring); touches nothing.

    Raises:
        FileExistsError: the folder holds a graph file, page or record of the same name that no save of a
            graph wrote. ValueError: its ``graph-metadata.json`` or its record is not what the name says.
    """
    from interp.preflight import check_output_folder, check_owned

    folder = check_output_folder(folder, flag=flag)
    check_owned(
        folder,
        [GRAPH_FILE, f"{slug}.json", PAGE, MANIFEST],
        owned(folder),
        flag=flag,
        command=COMMAND,
        record=MANIFEST,
    )
    if (folder / METADATA_FILE).exists() and _listing(folder) is None:
        raise ValueError(
            f'{flag} {folder / METADATA_FILE} is not a list of graphs ({{"graphs": [...]}}, as circuit-tracer '
            "and interp write it); it is left untouched: move it, or choose another folder"
        )
    return folder


def write_folder(
    folder: Path, files: Mapping[str, Callable[[Path], Any]], generation: str, metadata: dict[str, Any]
) -> None:
    """Write ``files`` (name -> writer, each file carrying ``generation``), ``graph-metadata.json`` with
    ``metadata`` added to its list, and the record, as one set (see the module docstring)."""
    record = read_manifest(folder)
    listed = dict(record["files"]) if record is not None else {}
    listed.update({name: generation for name in (*files, METADATA_FILE)})
    graphs = [g for g in _listing(folder) or [] if g.get("slug") != metadata["slug"]] + [metadata]
    text = json.dumps({"format": FORMAT, "generation": generation, "files": listed}, indent=1) + "\n"
    write_together(
        folder,
        {
            **files,
            METADATA_FILE: lambda tmp: tmp.write_text(
                json.dumps({"graphs": graphs}, indent=2) + "\n", "utf-8"
            ),
            MANIFEST: lambda tmp: tmp.write_text(text, encoding="utf-8"),
        },
    )


def check_generation(path: str | os.PathLike[str], generation: str | None) -> None:
    """Raise unless the file ``path``, which carries ``generation`` (``None``: none), is the one its folder's
    record lists: a file a save left new under the old record was stopped part way (the process was killed
    between renames) and belongs to no complete set. A folder without a record (written before records, or a
    file copied elsewhere) has nothing to check."""
    path = Path(path)
    record = read_manifest(path.parent)
    if record is None or path.name not in record["files"]:
        return
    if generation != record["files"][path.name]:
        raise ValueError(
            f"{path} is not the file {path.parent / MANIFEST} lists: the folder was left part-written by a save "
            "that was killed between its files; save the graph there again (interp attribute ... --out "
            f"{path.parent})"
        )


def _listing(folder: Path) -> list[dict[str, Any]] | None:
    """The graphs ``graph-metadata.json`` lists (``[]`` without one); ``None`` for a file that is not a list."""
    path = folder / METADATA_FILE
    if not path.exists():
        return []
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    graphs = listed.get("graphs") if isinstance(listed, dict) else None
    if not isinstance(graphs, list) or not all(isinstance(g, dict) for g in graphs):
        return None
    return graphs


def _is_interp_graph(path: Path) -> bool:
    """Whether ``path`` is a ``graph.safetensors`` an interp save wrote (its metadata holds ``n_layers``)."""
    if not path.is_file():
        return False
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "pt") as f:
            return "n_layers" in (f.metadata() or {})
    except (OSError, SafetensorError):
        return False
