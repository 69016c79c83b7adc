"""Explanations as the labels of a graph's feature nodes: the ``clerp`` field of Neuronpedia's graph schema.

Graph files (``graph.json`` from ``interp attribute``, ``<slug>.json`` from circuit-tracer's
``create_graph_files``, in the folder or its ``graph_data/``) number each feature node by ``featureIndex`` in its
``feature`` field, as the feature files are named, so a node finds its explanation by that number. Only feature
nodes are labelled (not embeddings, logits or errors, whose ``feature`` field means something else), only where
an explanation exists, and a graph whose metadata names another scan of the same folder (one with feature files
of its own under ``features/``) is left alone: its numbers are another dictionary's.
Each file is rewritten atomically, and only when a label changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.atomic import write_atomic

NOT_FEATURES = ("embedding", "logit", "mlp reconstruction error")
NOT_GRAPHS = ("index.json", "graph-metadata.json")


@dataclass(frozen=True)
class Labelled:
    """A graph file, how many of its nodes now carry an explanation, and why it was skipped (if it was)."""

    path: Path
    labelled: int
    skipped: str | None = None


def graph_files(root: Path) -> list[Path]:
    """The JSON files in ``root`` (and ``root/graph_data``) that hold a graph: a ``nodes`` list."""
    found = []
    for folder in (root, root / "graph_data"):
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
        changed = labelled = 0
        for node in graph["nodes"]:
            text = explanations.get(node.get("feature")) if _is_feature(node) else None
            if text is None:
                continue
            labelled += 1
            if node.get("clerp") != text:
                node["clerp"] = text
                changed += 1
        if changed:
            write_atomic(path, lambda tmp, g=graph: tmp.write_text(json.dumps(g) + "\n", encoding="utf-8"))
        results.append(Labelled(path, labelled))
    return results


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
