"""Linking a graph folder to a dictionary's dashboards, as circuit-tracer's server and interp's viewer read them.

A graph in ``OUT`` names its dashboards ``metadata.scan = "./data/features/SCAN"``: circuit-tracer's server
serves ``OUT`` under ``/data/``, so its page finds feature ``i`` at ``OUT/features/SCAN/i.json``. Dashboards
written elsewhere are linked into ``OUT/features/SCAN`` (a symbolic link to their folder; nothing is copied).
"""

from __future__ import annotations

import os
from pathlib import Path

from interp.feature_id import FeatureId
from interp.sae.dashboards.folder import INDEX
from interp.sae.dashboards.reader import Scan, find_scans
from interp.sae.dashboards.schema import FeatureFile


def scan_path(scan: str) -> str:
    """The ``metadata.scan`` of a graph whose dashboards are ``OUT/features/SCAN``."""
    return f"./data/features/{scan}"


def resolve(dashboards: str | os.PathLike[str]) -> Path:
    """The dashboards folder (``.../features/SCAN``) given that folder or an output folder holding one.

    Raises:
        FileNotFoundError: no finished dashboards there. ValueError: several, so the choice is the caller's.
    """
    path = Path(dashboards).expanduser()
    found = [scan for scan in map(Scan, find_scans(path)) if scan.finished]
    if not found:
        raise FileNotFoundError(
            f"--dashboards {path} holds no finished dashboards (no features/SCAN/{INDEX}); write them with "
            "interp dashboards MODEL --dictionary ... --out DIR"
        )
    if len(found) > 1:
        names = ", ".join(str(scan.root) for scan in found)
        raise ValueError(
            f"--dashboards {path} holds dashboards of several dictionaries ({names}); name one folder, such as "
            f"{found[0].root}"
        )
    found[0].index()  # interp's own index, readable
    return found[0].root


def link(out: str | os.PathLike[str], dashboards: str | os.PathLike[str]) -> str:
    """Make the dashboards at ``dashboards`` visible as ``OUT/features/SCAN``; returns ``SCAN``.

    Raises:
        FileExistsError: ``OUT/features/SCAN`` is another folder.
    """
    folder = resolve(dashboards).resolve()
    scan = folder.name
    target = Path(out).expanduser() / "features" / scan
    if target.exists() or target.is_symlink():
        if target.resolve() == folder:
            return scan
        raise FileExistsError(
            f"{target} already holds other dashboards; write the graph to another --out, or the dashboards "
            "under another --scan"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(folder, target_is_directory=True)
    return scan


def records_of(
    folder: str | os.PathLike[str], features: list[tuple[int, int]]
) -> dict[tuple[int, int], FeatureFile]:
    """``(layer, feature) -> file`` for the features whose files are in the dashboards folder."""
    found = Scan(Path(folder)).files(FeatureId(layer, feature) for layer, feature in features)
    return {(fid.layer, fid.feature): file for fid, file in found.items()}
