"""Reading a dashboards folder: circuit-tracer's feature files, one per feature, and the index that lists them.

The folder is laid out as circuit-tracer's local server serves features: ``features/<scan>/<featureIndex>.json``,
each a feature file in the schema of circuit-tracer 0.5's ``frontend/feature_models.py`` (``examples_quantiles``,
each a list of examples with ``tokens``, ``tokens_acts_list`` and ``train_token_ind``; ``top_logits``,
``act_min``, ``act_max``, ``quantile_values``, ``histogram``, ``activation_frequency``). An ``index.json``
(in the folder, in ``features/`` or beside the files) lists the features as ``{"layer", "feature",
"featureIndex", "density"}`` objects, either as a list or under ``"features"``; without one, the file names
are the list and each ``featureIndex`` is unpaired into its layer and feature (but a folder that ``interp
dashboards`` is still writing, with its ``run.json`` and no index yet, is refused: its files are not all there).

Files are read one at a time, when a feature's turn comes, so a folder of a hundred thousand features costs
nothing to open; a file that is not a feature file is reported for that feature alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.sae.explanations.records import Example, FeatureId, FeatureRecord

INDEX = "index.json"


class FeatureFileError(ValueError):
    """A feature file that cannot be read as one (a bad file costs its own feature, not the run)."""


@dataclass(frozen=True)
class FeatureFiles:
    """The feature files of one scan in a dashboards folder.

    Attributes:
        root: the folder given.
        scan: the scan's name (the folder under ``features/``).
        features: the features listed, in the index's order.
        density: ``featureIndex`` -> the density the index gives, where it gives one.
    """

    root: Path
    scan: str
    features: tuple[FeatureId, ...]
    density: dict[int, float]

    @classmethod
    def open(cls, root: str | Path, scan: str | None = None) -> FeatureFiles:
        """Find the scan's feature files and their index under ``root``.

        Raises:
            FileNotFoundError: ``root`` is not a folder, or holds no ``features/`` folder.
            ValueError: several scans and no ``scan`` named, an unknown ``scan``, an unreadable index, or no
                feature at all.
        """
        root = Path(root).expanduser()
        if not root.is_dir():
            raise FileNotFoundError(
                f"{root} is not a folder; give the dashboards folder (interp dashboards --out)"
            )
        base = root / "features"
        scans = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
        if not scans:
            raise FileNotFoundError(
                f"{root} holds no feature files (no features/<scan>/ folder); write them with interp dashboards"
            )
        if scan is None:
            if len(scans) > 1:
                raise ValueError(f"{root} holds several scans ({', '.join(scans)}); name one with --scan")
            scan = scans[0]
        if scan not in scans:
            raise ValueError(f"--scan {scan!r} is not in {base}; it holds {', '.join(scans)}")
        entries = _index_entries(root, scan)
        if entries is None and (base / scan / "run.json").is_file():
            raise ValueError(
                f"{base / scan} is still being written by interp dashboards (no index.json yet); let it finish, or "
                "run it again to continue"
            )
        if entries is None:
            files = sorted((base / scan).glob("*.json"), key=lambda p: (len(p.stem), p.stem))
            entries = [{"featureIndex": int(p.stem)} for p in files if p.stem.isdigit()]
        features, density = [], {}
        for entry in entries:
            fid = _entry_feature(entry, root)
            features.append(fid)
            if isinstance(entry.get("density"), (int, float)):
                density[fid.index] = float(entry["density"])
        if not features:
            raise ValueError(
                f"{base / scan} lists no feature; write the feature files with interp dashboards"
            )
        return cls(root, scan, tuple(features), density)

    def path(self, fid: FeatureId) -> Path:
        return self.root / "features" / self.scan / f"{fid.index}.json"

    def select(self, wanted: Iterable[FeatureId] | None) -> list[FeatureId]:
        """``wanted`` in the order given (all features if ``None``), each checked to be in the folder.

        Raises:
            ValueError: naming the features the folder does not hold.
        """
        if wanted is None:
            return list(self.features)
        wanted = list(dict.fromkeys(wanted))
        known = set(self.features)
        missing = [str(f) for f in wanted if f not in known]
        if missing:
            raise ValueError(
                f"--features {','.join(missing)}: not in {self.root / 'features' / self.scan} "
                f"({len(self.features)} features, e.g. {self.features[0]})"
            )
        return wanted

    def record(self, fid: FeatureId) -> FeatureRecord:
        """The feature's examples, read from its file.

        Raises:
            FeatureFileError: the file is missing or not a feature file.
        """
        return read_feature_file(self.path(fid), fid, self.density.get(fid.index))


def read_feature_file(path: Path, fid: FeatureId, density: float | None = None) -> FeatureRecord:
    """A feature file in circuit-tracer's schema as a :class:`FeatureRecord`: the examples of quantile ``q``
    (its place in ``examples_quantiles``) are activating examples of quantile ``q``; an example with no
    non-zero activation is a non-activating one."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FeatureFileError(f"{path}: no such feature file, though the index lists {fid}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FeatureFileError(f"{path}: not a JSON feature file ({err})") from None
    quantiles = data.get("examples_quantiles") if isinstance(data, dict) else None
    if not isinstance(quantiles, list):
        raise FeatureFileError(f"{path}: no 'examples_quantiles' list; not a circuit-tracer feature file")
    activating, non_activating = [], []
    for q, quantile in enumerate(quantiles):
        for example in _examples(quantile, path, q):
            (activating if example.active else non_activating).append(example)
    if density is None and isinstance(data.get("activation_frequency"), (int, float)):
        density = float(data["activation_frequency"])
    return FeatureRecord(fid, tuple(activating), tuple(non_activating), density, str(path))


def _examples(quantile: Any, path: Path, q: int) -> list[Example]:
    rows = quantile.get("examples") if isinstance(quantile, dict) else None
    if not isinstance(rows, list):
        raise FeatureFileError(
            f"{path}: quantile {q} has no 'examples' list; not a circuit-tracer feature file"
        )
    examples = []
    for i, row in enumerate(rows):
        try:
            tokens, acts = row["tokens"], row["tokens_acts_list"]
            example = Example(
                tuple(str(t) for t in tokens),
                tuple(float(a) for a in acts),
                q,
                int(row.get("train_token_ind", 0)),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise FeatureFileError(
                f"{path}: example {i} of quantile {q} is not tokens plus tokens_acts_list ({err})"
            ) from None
        examples.append(example)
    return examples


def _index_entries(root: Path, scan: str) -> list[dict[str, Any]] | None:
    for path in (root / INDEX, root / "features" / INDEX, root / "features" / scan / INDEX):
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(
                f"{path}: not a readable index ({err}); rewrite it with interp dashboards"
            ) from None
        entries = data.get("features") if isinstance(data, dict) else data
        if isinstance(entries, list) and all(isinstance(e, dict) and "featureIndex" in e for e in entries):
            return entries
    return None


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
