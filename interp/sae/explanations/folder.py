"""Reading a dashboards folder: circuit-tracer's feature files, one per feature, and the index that lists them.

The folder is laid out as circuit-tracer's local server serves features: ``features/<scan>/<featureIndex>.json``,
each a feature file in the schema of circuit-tracer 0.5's ``frontend/feature_models.py``. Finding the scans,
listing a scan's features and reading each file is :mod:`interp.sae.dashboards.reader`'s (one reader for every
user of these files; see there for the indexes it reads, and why a folder still being written is refused); here
each file becomes the feature's examples. Files are read one at a time, when a feature's turn comes; a file that
is not a feature file is reported for that feature alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from interp.sae.dashboards.reader import Scan, find_scans, read_file
from interp.sae.dashboards.schema import FeatureFileError
from interp.sae.explanations.records import Example, FeatureId, FeatureRecord

__all__ = ["FeatureFileError", "FeatureFiles", "read_feature_file"]


@dataclass(frozen=True)
class FeatureFiles:
    """The feature files of one scan in a dashboards folder.

    Attributes:
        root: the folder given.
        scan: the scan's name (the folder under ``features/``).
        features: the features listed, in the index's order.
        density: ``featureIndex`` -> the density the index gives, where it gives one.
        folder: the scan's folder.
    """

    root: Path
    scan: str
    features: tuple[FeatureId, ...]
    density: dict[int, float]
    folder: Path

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
        scans = {p.name: Scan(p) for p in find_scans(root)}
        if not scans:
            raise FileNotFoundError(
                f"{root} holds no feature files (no features/<scan>/ folder); write them with interp dashboards"
            )
        if scan is None:
            if len(scans) > 1:
                raise ValueError(f"{root} holds several scans ({', '.join(scans)}); name one with --scan")
            scan = next(iter(scans))
        if scan not in scans:
            raise ValueError(f"--scan {scan!r} is not in {root / 'features'}; it holds {', '.join(scans)}")
        found = scans[scan]
        features, density = found.features()
        if not features:
            raise ValueError(f"{found.root} lists no feature; write the feature files with interp dashboards")
        return cls(root, scan, tuple(features), {f.index: d for f, d in density.items()}, found.root)

    def path(self, fid: FeatureId) -> Path:
        return Scan(self.folder).path(fid)

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
                f"--features {','.join(missing)}: not in {self.folder} "
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
    non-zero activation is a non-activating one.

    Raises:
        FeatureFileError: the file is missing or not a feature file.
    """
    file = read_file(path, fid)
    activating, non_activating = [], []
    for q, group in enumerate(file.examples_quantiles):
        for e in group.examples:
            example = Example(tuple(e.tokens), tuple(e.tokens_acts_list), q, e.train_token_ind)
            (activating if example.active else non_activating).append(example)
    if density is None and file.activation_frequency is not None:
        density = float(file.activation_frequency)
    return FeatureRecord(fid, tuple(activating), tuple(non_activating), density, str(path))
