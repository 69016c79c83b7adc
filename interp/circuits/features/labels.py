"""Labels on a graph's feature nodes: the ``clerp`` field of Neuronpedia's graph schema, where explanations go.

Graph files (``graph.json`` from ``interp attribute``, ``<slug>.json`` from circuit-tracer's
``create_graph_files``, in the folder or its ``graph_data/``) number each feature node by ``featureIndex`` in its
``feature`` field, as the feature files are named, so a node finds its explanation by that number. Only feature
nodes are labelled (not embeddings, logits or errors, whose ``feature`` field means something else), only where
an explanation exists, and a graph whose metadata names another scan of the same folder (one with feature files
of its own under ``features/``) is left alone: its numbers are another dictionary's.
Each file is rewritten atomically, and only when a label changed.

A viewer page built from a graph file (``index.html`` beside ``<slug>.json``, written by
``AttributionGraph.save``) embeds a copy of the graph's nodes, so that it opens from the file system; a page
whose embedded metadata names the graph's slug gets the same labels in that copy, rewritten the same way. Doing
it here, where the labels are written, keeps the page true whether it is opened from a file or served: a page
that fetched the graph file when served would still be stale when opened from disk, the common case.

The labels come from anywhere (``interp autointerp`` passes the explanations it wrote); what a graph file is,
which of its nodes are features and where a page embeds its graph are the graph files' own
(:mod:`~interp.circuits.features.neuronpedia`, :mod:`~interp.circuits.features.graph`, the viewer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.atomic import write_atomic
from interp.circuits.features.graph_folder import METADATA_FILE
from interp.circuits.features.neuronpedia import NOT_FEATURES
from interp.circuits.features.viewer import DATA_ID
from interp.report.embedded import embedded_json, replace_embedded_json

GRAPH_DATA = "graph_data"
"""The subfolder circuit-tracer's ``create_graph_files`` writes its graph files into."""
NOT_GRAPHS = ("index.json", METADATA_FILE)
"""JSON files beside the graphs that are not graphs: a dashboards folder's index, the graphs' list."""
EXACT_DIGITS = 17
"""Significant digits that keep every float of a rewritten page as it was (a double needs at most 17)."""


@dataclass(frozen=True)
class Labelled:
    """A graph file, how many of its nodes now carry an explanation, why it was skipped (if it was), and the
    viewer pages built from it whose embedded copy was relabelled."""

    path: Path
    labelled: int
    skipped: str | None = None
    pages: tuple[Path, ...] = ()


def graph_files(root: Path) -> list[Path]:
    """The JSON files in ``root`` (and ``root/graph_data``) that hold a graph: a ``nodes`` list."""
    found = []
    for folder in (root, root / GRAPH_DATA):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            if path.name in NOT_GRAPHS:
                continue
            graph = _read(path)
            if graph is not None:
                found.append(path)
    return found


def add_labels(root: str | Path, explanations: dict[int, str], scan: str) -> list[Labelled]:
    """Write ``explanations`` (``featureIndex`` -> text) into the ``clerp`` of the graphs' feature nodes."""
    results = []
    for path in graph_files(Path(root)):
        graph = _read(path)
        assert graph is not None
        named = (graph.get("metadata") or {}).get("scan")
        other = isinstance(named, str) and _scan_name(named) not in ("", ".", scan)
        if other and (Path(root) / "features" / _scan_name(named)).is_dir():
            results.append(Labelled(path, 0, f"its metadata names scan {named!r}, not {scan!r}"))
            continue
        labelled, changed = _label(graph["nodes"], explanations)
        if changed:
            write_atomic(path, lambda tmp, g=graph: tmp.write_text(json.dumps(g) + "\n", encoding="utf-8"))
        pages = tuple(p for p in _pages_of(path, graph) if _label_page(p, explanations))
        results.append(Labelled(path, labelled, pages=pages))
    return results


def _label(nodes: list[Any], explanations: dict[int, str]) -> tuple[int, int]:
    """Set the ``clerp`` of the feature ``nodes`` that have an explanation: (how many have one, how many
    changed)."""
    changed = labelled = 0
    for node in nodes:
        text = explanations.get(node.get("feature")) if _is_feature(node) else None
        if text is None:
            continue
        labelled += 1
        if node.get("clerp") != text:
            node["clerp"] = text
            changed += 1
    return labelled, changed


def _pages_of(path: Path, graph: dict[str, Any]) -> list[Path]:
    """The viewer pages beside graph file ``path`` built from it: their embedded metadata names its slug."""
    slug = (graph.get("metadata") or {}).get("slug")
    if not isinstance(slug, str) or f"{slug}.json" != path.name:
        return []
    found = []
    for page in sorted(path.parent.glob("*.html")):
        data = embedded_json(page.read_text(encoding="utf-8"), DATA_ID)
        if isinstance(data, dict) and (data.get("metadata") or {}).get("slug") == slug:
            found.append(page)
    return found


def _label_page(page: Path, explanations: dict[int, str]) -> bool:
    """Relabel the feature nodes ``page`` embeds, rewriting it atomically if any changed; whether it did."""
    html = page.read_text(encoding="utf-8")
    data = embedded_json(html, DATA_ID)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return False
    if not _label(data["nodes"], explanations)[1]:
        return False
    text = replace_embedded_json(html, DATA_ID, data, digits=EXACT_DIGITS)
    write_atomic(page, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if isinstance(data, dict) and isinstance(data.get("nodes"), list):
        return data
    return None


def _is_feature(node: Any) -> bool:
    return (
        isinstance(node, dict)
        and node.get("feature_type") not in NOT_FEATURES
        and isinstance(node.get("feature"), int)
        and node["feature"] >= 0
        and str(node.get("layer", "")).isdigit()
    )


def _scan_name(named: str) -> str:
    """A scan as a graph names it (``"./features/my-tc"`` for a local scan) -> the folder name."""
    return named.rstrip("/").split("/")[-1]
