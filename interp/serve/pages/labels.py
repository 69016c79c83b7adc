"""Feature labels from the named folders, each tied to the served dictionary it describes: explanations
(``explanations.jsonl``, as ``interp autointerp`` writes them) and the ``clerp`` of graph files' feature nodes.

A label names a feature by layer and index *of some dictionary*, so it describes a served source only where
that dictionary is the one served. The tie is the dashboards' own record of what made them: a scan's
``run.json`` holds the fingerprints of the model and the dictionary (:mod:`interp.sae.dashboards.identity`),
compared here with the served model's and each served dictionary's. An explanation names its scan, found in the
``features/`` folder beside its file. A graph's clerps describe the transcoders it was traced with: the scan its
metadata links (``./data/features/SCAN``) when that scan is of a served dictionary, or the transcoders' folder
it names when that is the one the server traces with. A label of a dictionary that is not served is still
listed (search finds it, with its scan and file) but belongs to no source. Where a feature has both, its
explanation is its label.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.feature_id import FeatureId
from interp.serve.folders import read_json

SCAN_LINK = "./data/features/"
"""How a graph's ``metadata.scan`` names dashboards beside it (:func:`interp.sae.dashboards.link.scan_path`)."""


class Identities:
    """The served dictionaries' fingerprints, by source set, and the served model's, computed when a scan first
    names a served dictionary (the model's fingerprint reads its tokenizer whole: seconds for a large vocabulary,
    paid once, and only by a server whose folders hold such a scan)."""

    def __init__(self, served: Any) -> None:
        from interp.sae.dashboards.identity import fingerprint
        from interp.sae.dashboards.reading import as_dictionary

        self.served = served
        self._model: str | None = None
        self.sets: dict[str, str] = {}
        self.transcoders: str | None = None
        for set_name, sources in served.sources.sets.items():
            for dictionary in {
                id(s.dictionary): s.dictionary for s in sources
            }.values():  # a set's layers share one
                if dictionary is served.transcoders:
                    self.transcoders = set_name
                self.sets.setdefault(fingerprint(as_dictionary(dictionary)), set_name)

    @property
    def model(self) -> str:
        """The served model's fingerprint (:func:`interp.store.meta.model_fingerprint`)."""
        if self._model is None:
            from interp.store.meta import model_fingerprint

            self._model = model_fingerprint(self.served.model)
        return self._model

    def set_of(self, run: dict[str, Any]) -> str | None:
        """The source set whose dictionary made a scan (its ``run.json``) on the served model, or ``None``."""
        model, dictionary = run.get("model"), run.get("dictionary")
        if not isinstance(model, dict) or not isinstance(dictionary, dict):
            return None
        found = self.sets.get(str(dictionary.get("fingerprint")))
        return found if found is not None and model.get("fingerprint") == self.model else None


@dataclass(frozen=True)
class ScanInfo:
    """A dashboards scan in a named folder: the folder's name, the scan's path in it, its name, where it really
    is, and the source set whose dictionary made it (``None``: another dictionary or model)."""

    folder: str
    path: str
    scan: str
    real: Path
    set_name: str | None

    def has(self, layer: int, feature: int) -> bool:
        """Whether the scan holds this feature's file."""
        return (self.real / f"{FeatureId(layer, feature).index}.json").is_file()


@dataclass(frozen=True)
class Label:
    """What a feature is said to be: its text, the feature (layer and index), the source set it belongs to (or
    ``None``), the scan it was written for, and where it was read (``explanation`` or graph ``clerp``, the
    served folder's name and the file's path there)."""

    text: str
    layer: int
    feature: int
    set_name: str | None
    scan: str
    kind: str
    folder: str
    file: str

    @property
    def source(self) -> str | None:
        return None if self.set_name is None else f"{self.layer}-{self.set_name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "layer": self.layer,
            "index": self.feature,
            "featureIndex": FeatureId(self.layer, self.feature).index,
            "source": self.source,
            "scan": self.scan,
            "kind": self.kind,
            "folder": self.folder,
            "file": self.file,
        }


class Labels:
    """Every label of the named folders, and the scans (see the module docstring)."""

    def __init__(self, labels: list[Label], scans: list[ScanInfo]) -> None:
        self.all = labels
        self.scans = scans
        self._by_feature: dict[tuple[str, int, int], Label] = {}
        for label in labels:  # explanations come first, so a clerp never replaces one
            if label.set_name is not None:
                self._by_feature.setdefault((label.set_name, label.layer, label.feature), label)

    def of(self, set_name: str, layer: int, feature: int) -> Label | None:
        """The label of a served feature, or ``None``."""
        return self._by_feature.get((set_name, layer, feature))

    def scan_with(self, set_name: str, layer: int, feature: int) -> ScanInfo | None:
        """A finished scan of the served dictionary holding this feature's file, or ``None``."""
        for scan in self.scans:
            if scan.set_name == set_name and scan.has(layer, feature):
                return scan
        return None

    def scan_of_set(self, set_name: str | None) -> ScanInfo | None:
        """The first scan of a source set's dictionary, or ``None``."""
        return next((s for s in self.scans if set_name is not None and s.set_name == set_name), None)


def signature(folders: Any) -> tuple:
    """What the labels are read from, with each file's size and time: labels are read again when it changes."""
    from interp.sae.dashboards.folder import RUN

    found = []
    for name, _, kind, path in _files(folders):
        if kind == "scan":
            path = path / RUN
        try:
            stat = path.stat()
        except OSError:
            continue
        found.append((name, kind, str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def read_labels(served: Any, identities: Identities) -> Labels:
    """Every label and scan of the served folders."""
    from interp.sae.dashboards.folder import INDEX, RUN
    from interp.sae.explanations.autointerp import read_rows

    scans, explanations, graphs = [], [], []
    for name, root, kind, path in _files(served.folders):
        if kind == "scan":
            if (path / INDEX).is_file():
                set_name = identities.set_of(read_json(path / RUN))
                rel = path.relative_to(root).as_posix()
                scans.append(ScanInfo(name, rel, path.name, path.resolve(), set_name))
        elif kind == "explanations":
            explanations.append((name, root, path))
        else:
            graphs.append((name, root, path))
    by_real = {scan.real: scan for scan in scans}
    labels = []
    for name, root, path in explanations:
        for row in read_rows(path).values():
            text, scan = row.get("explanation"), row.get("scan")
            if not isinstance(text, str) or not text.strip() or not isinstance(scan, str):
                continue
            found = by_real.get((path.parent / "features" / scan).resolve())
            layer, feature = _feature(row)
            if layer is None:
                continue
            set_name = found.set_name if found is not None else None
            file = path.relative_to(root).as_posix()
            labels.append(Label(text.strip(), layer, feature, set_name, scan, "explanation", name, file))
    for name, root, path in graphs:
        labels += _clerps(served, identities, by_real, name, root, path)
    return Labels(labels, scans)


def _feature(row: dict[str, Any]) -> tuple[int | None, int]:
    try:
        return int(row["layer"]), int(row["index"])
    except (KeyError, TypeError, ValueError):
        try:
            found = FeatureId.from_index(int(row["featureIndex"]))
        except (KeyError, TypeError, ValueError):
            return None, 0
        return found.layer, found.feature


def _clerps(
    served: Any, identities: Identities, by_real: dict[Path, ScanInfo], name: str, root: Path, path: Path
) -> list[Label]:
    """The clerps of a graph file's feature nodes, tied to the served transcoders where the graph is theirs."""
    doc = read_json(path)
    named = str((doc.get("metadata") or {}).get("scan", ""))
    set_name, scan = None, named
    if named.startswith(SCAN_LINK):
        scan = named[len(SCAN_LINK) :]
        found = by_real.get((path.parent / "features" / scan).resolve())
        set_name = found.set_name if found is not None else None
    elif named and served.transcoders is not None and served.transcoders_name:
        if _same_path(named, served.transcoders_name):
            set_name = identities.transcoders
    labels = []
    file = path.relative_to(root).as_posix()
    for node in doc.get("nodes") or []:
        if not isinstance(node, dict) or node.get("feature_type") != "cross layer transcoder":
            continue
        clerp = node.get("clerp")
        if not isinstance(clerp, str) or not clerp.strip():
            continue
        try:
            found_id = FeatureId.from_index(int(node["feature"]))
        except (KeyError, TypeError, ValueError):
            continue
        labels.append(
            Label(clerp.strip(), found_id.layer, found_id.feature, set_name, scan, "clerp", name, file)
        )
    return labels


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, RuntimeError):
        return False


def _files(folders: Any) -> list[tuple[str, Path, str, Path]]:
    """``(folder name, its root, kind, path)`` of every scan, explanations file and graph file listed."""
    found = []
    for listing in folders.catalogue()["folders"]:
        name = listing["name"]
        root = folders.roots[name]
        for scan in listing["scans"]:
            found.append((name, root, "scan", root / scan["folder"]))
        for item in listing["explanations"]:
            found.append((name, root, "explanations", root / item["folder"] / item["file"]))
        for graph in listing["graphs"]:
            found.append((name, root, "graph", root / graph["folder"] / graph["file"]))
    return found
