"""Files served read-only from the folders named on the command line, and nothing else.

Each folder is served under ``/files/NAME/`` (``NAME`` its own name, made unique), so the pages interp writes
offline (a graph's viewer, a dictionary's dashboards, a report) open from the server with the files beside
them. A path is refused before the disk is touched when it is absolute or has a ``..`` part; otherwise it is
resolved, symbolic links followed, and served only if where it leads is inside one of the named folders (a
graph folder's ``features/SCAN`` link to dashboards elsewhere works when that folder is named too). A folder is
answered with its ``index.html`` where it has one.

:meth:`Folders.catalogue` lists what the folders hold, for a home page: graphs (each ``graph-metadata.json``'s
entries), dashboard scans (``features/SCAN`` with their ``run.json``), reports (``manifest.json`` beside an
``index.html``) and explanations (``explanations.jsonl``, as ``interp autointerp`` writes them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from interp.serve.errors import RequestError

EXPLANATIONS = "explanations.jsonl"  # what interp autointerp writes
MAX_DEPTH = 6  # folders deeper than this below a named folder are not listed (their files are still served)


class Folders:
    """The named folders (see the module docstring)."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        self.roots: dict[str, Path] = {}
        for path in paths:
            root = Path(path).expanduser()
            if not root.is_dir():
                raise NotADirectoryError(
                    f"--folder {root} is not a folder; name folders of graphs, dashboards or reports"
                )
            name, n = root.resolve().name or "root", 1
            while name in self.roots:
                n += 1
                name = f"{root.resolve().name}-{n}"
            self.roots[name] = root.resolve()

    def resolve(self, name: str, relative: str) -> Path:
        """The file or folder ``relative`` in folder ``name``, where it really is (see the module docstring).

        Raises:
            RequestError: 404 for an unknown folder or a missing file, 400 for an absolute path or a ``..``
            part, 403 for a path that leads out of the named folders.
        """
        if name not in self.roots:
            raise RequestError(
                404, f"no folder {name!r} is served; the folders are {sorted(self.roots) or 'none'}"
            )
        if "\x00" in relative or "\\" in relative:
            raise RequestError(400, f"the path {relative!r} holds a NUL or a backslash; give a path with '/'")
        parts = PurePosixPath(relative).parts
        if relative.startswith("/") or any(p == ".." for p in parts):
            raise RequestError(
                400, f"the path {relative!r} is absolute or climbs with '..'; give a path inside the folder"
            )
        target = self.roots[name].joinpath(*parts)
        try:
            real = target.resolve(strict=True)
        except (FileNotFoundError, NotADirectoryError):
            raise RequestError(404, f"{name}/{relative} does not exist") from None
        except (OSError, RuntimeError) as err:  # a symbolic link loop
            raise RequestError(404, f"{name}/{relative} cannot be read ({err})") from None
        if not any(real.is_relative_to(root) for root in self.roots.values()):
            raise RequestError(
                403, f"{name}/{relative} is a link leading outside the served folders; it is not served"
            )
        return real

    def catalogue(self) -> dict[str, Any]:
        """What every folder holds: ``{"folders": [{"name", "graphs", "scans", "reports", "explanations"}]}``,
        each item with its path relative to its folder."""
        return {"folders": [self._listing(name, root) for name, root in self.roots.items()]}

    def _listing(self, name: str, root: Path) -> dict[str, Any]:
        from interp.circuits.features.graph_folder import METADATA_FILE
        from interp.sae.dashboards.folder import INDEX, RUN

        found: dict[str, list] = {"graphs": [], "scans": [], "reports": [], "explanations": []}
        for folder, files in _walk(root):
            where = folder.relative_to(root).as_posix()
            if METADATA_FILE in files:
                for graph in _read_json(folder / METADATA_FILE).get("graphs", []):
                    if isinstance(graph, dict) and isinstance(graph.get("slug"), str):
                        entry = {k: graph.get(k) for k in ("slug", "prompt", "scan", "node_threshold")}
                        found["graphs"].append({**entry, "folder": where, "file": f"{graph['slug']}.json"})
            if RUN in files and folder.parent.name == "features":
                run = _read_json(folder / RUN)
                found["scans"].append(
                    {
                        "scan": folder.name,
                        "folder": where,
                        "complete": INDEX in files,
                        "model": run.get("model"),
                    }
                )
            if "manifest.json" in files and "index.html" in files:
                manifest = _read_json(folder / "manifest.json")
                found["reports"].append(
                    {"folder": where, "title": manifest.get("title") or manifest.get("study")}
                )
            if EXPLANATIONS in files:
                found["explanations"].append({"folder": where, "file": EXPLANATIONS})
        return {"name": name, **found}


def _walk(root: Path) -> Any:
    """``(folder, set of file names)`` under ``root``, depth-first to :data:`MAX_DEPTH`, never through a link
    that leads outside ``root``."""
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        files = {e.name for e in entries if e.is_file()}
        yield folder, files
        if depth < MAX_DEPTH:
            for e in sorted(entries, key=lambda e: e.name, reverse=True):
                if e.is_dir() and not e.name.startswith("."):
                    path = Path(e.path)
                    if not e.is_symlink() or path.resolve().is_relative_to(root):
                        stack.append((path, depth + 1))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
