"""Reading feature files: the scans in a folder, each scan's list of features, and each feature's file.

Every reader of dashboards goes through here: the graph viewer and ``interp attribute --dashboards`` (which
dashboards, and the files of a graph's features), the dashboard page (the files it embeds) and
``interp autointerp`` (every feature's examples). A folder's scans are found one way, :func:`find_scans`:

- every folder in ``DIR/features/`` (``OUT/features/SCAN``, as circuit-tracer's server lays them out);
- else ``DIR`` itself, when it is a scan (it holds ``index.json``, or the ``run.json`` of a run still writing).

A scan lists its features in its ``index.json`` (``interp dashboards`` writes it last, so a scan without one is
unfinished), or in an index of circuit-tracer's layout above it (``DIR/features/index.json`` or
``DIR/index.json``: ``{"featureIndex", "layer", "feature", "density"}`` objects, as a list or under
``"features"``), or, with neither, by its files' names (each ``featureIndex`` unpaired into its layer and
feature). Files are read one at a time, when asked for, so a scan of a hundred thousand features costs nothing to
open.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.feature_id import FeatureId
from interp.sae.dashboards.folder import FORMAT, INDEX, RUN
from interp.sae.dashboards.schema import FeatureFile, FeatureFileError


def find_scans(folder: str | os.PathLike[str]) -> list[Path]:
    """The scans in ``folder``: every folder in ``folder/features/`` (sorted), else ``folder`` itself if it is
    one."""
    folder = Path(folder).expanduser()
    base = folder / "features"
    if base.is_dir():
        return sorted(p for p in base.iterdir() if p.is_dir())
    return [folder] if (folder / INDEX).is_file() or (folder / RUN).is_file() else []


@dataclass(frozen=True)
class Scan:
    """One scan's folder of feature files (``OUT/features/SCAN``)."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def finished(self) -> bool:
        """Whether ``interp dashboards`` finished it (its ``index.json`` is written last)."""
        return (self.root / INDEX).is_file()

    @property
    def writing(self) -> bool:
        """Whether ``interp dashboards`` is still writing it (its ``run.json`` and no ``index.json`` yet)."""
        return (self.root / RUN).is_file() and not self.finished

    def run(self) -> dict[str, Any] | None:
        """The identity ``interp dashboards`` claimed the folder with (its ``run.json``: model, dictionary, data,
        settings), or ``None`` where it has none or one that cannot be read."""
        path = self.root / RUN
        if not path.is_file():
            return None
        try:
            run = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None
        return run if isinstance(run, dict) else None

    def index(self) -> dict[str, Any]:
        """Its ``index.json``, checked to be ``interp dashboards``' (format :data:`~.folder.FORMAT`).

        Raises:
            FileNotFoundError: none (an unfinished folder). ValueError: not interp's index.
        """
        path = self.root / INDEX
        if not path.is_file():
            raise FileNotFoundError(
                f"{self.root} has no {INDEX}: it is not a finished dashboards folder (write one with interp "
                "dashboards, or run the same command again to finish it)"
            )
        index = _json(path)
        if not isinstance(index, dict) or index.get("format") != FORMAT:
            raise ValueError(f"{path} is not an interp dashboards index (format {FORMAT})")
        return index

    def listed(self) -> list[dict[str, Any]]:
        """Its features as index entries (``featureIndex``, and ``layer``, ``feature``, ``density`` where the
        index gives them), from the first index found, else from the files' names.

        Raises:
            ValueError: an index that cannot be read, or a folder still being written.
        """
        if self.writing:
            raise ValueError(
                f"{self.root} is still being written by interp dashboards (no {INDEX} yet); let it finish, or run "
                "it again to continue"
            )
        places = [self.root]
        if self.root.parent.name == "features":  # OUT/features/SCAN: an index of circuit-tracer's layout
            places += [self.root.parent, self.root.parent.parent]
        for path in (place / INDEX for place in places):
            if not path.is_file():
                continue
            data = _json(path)
            entries = data.get("features") if isinstance(data, dict) else data
            if isinstance(entries, list) and all(
                isinstance(e, dict) and "featureIndex" in e for e in entries
            ):
                return entries
        files = sorted(self.root.glob("*.json"), key=lambda p: (len(p.stem), p.stem))
        return [{"featureIndex": int(p.stem)} for p in files if p.stem.isdigit()]

    def features(self) -> tuple[list[FeatureId], dict[FeatureId, float]]:
        """The features listed, in order, and the density of each where the list gives one.

        Raises:
            ValueError: an entry whose ``layer`` and ``feature`` do not pair to its ``featureIndex``.
        """
        features, density = [], {}
        for entry in self.listed():
            fid = _entry_feature(entry, self.root)
            features.append(fid)
            if isinstance(entry.get("density"), (int, float)):
                density[fid] = float(entry["density"])
        return features, density

    def path(self, fid: FeatureId) -> Path:
        """Where feature ``fid``'s file is."""
        return self.root / f"{fid.index}.json"

    def read(self, fid: FeatureId) -> FeatureFile:
        """Feature ``fid``'s file.

        Raises:
            FeatureFileError: the file is missing or not a feature file.
        """
        return read_file(self.path(fid), fid)

    def files(self, features: Iterable[FeatureId]) -> dict[FeatureId, FeatureFile]:
        """The files of those of ``features`` the scan holds (a missing file is left out)."""
        return {fid: self.read(fid) for fid in features if self.path(fid).is_file()}


def read_file(path: Path, fid: FeatureId) -> FeatureFile:
    """The feature file at ``path``, listed as feature ``fid``.

    Raises:
        FeatureFileError: the file is missing or not a feature file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FeatureFileError(f"{path}: no such feature file, though the index lists {fid}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise FeatureFileError(f"{path}: not a JSON feature file ({err})") from None
    return FeatureFile.from_json(text, str(path))


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable index ({err}); rewrite it with interp dashboards") from None


def _entry_feature(entry: dict[str, Any], root: Path) -> FeatureId:
    try:
        index = int(entry["featureIndex"])
        fid = FeatureId.from_index(index)
        if "layer" in entry and "feature" in entry:
            given = FeatureId(int(entry["layer"]), int(entry["feature"]))
            if given != fid:
                raise ValueError(
                    f"layer {given.layer}, feature {given.feature} pair to {given.index}, not {index}"
                )
    except (TypeError, ValueError) as err:
        raise ValueError(f"{root}: the index entry {entry} is not a feature ({err})") from None
    return fid
