"""Linking a graph folder to a dictionary's dashboards, as circuit-tracer's server and interp's viewer read them.

A graph in ``OUT`` names its dashboards ``metadata.scan = "./data/features/SCAN"``: circuit-tracer's server
serves ``OUT`` under ``/data/``, so its page finds feature ``i`` at ``OUT/features/SCAN/i.json``. Dashboards
written elsewhere are linked into ``OUT/features/SCAN`` (a symbolic link to their folder; nothing is copied).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from interp.feature_id import FeatureId
from interp.sae.dashboards.folder import INDEX, RUN
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


def check_identity(dashboards: str | os.PathLike[str], model: Any, dictionary: Any) -> Path:
    """The dashboards folder ``dashboards`` names (:func:`resolve`), once its ``run.json`` shows it was made with
    ``model`` and ``dictionary`` (their fingerprints), so that a graph never shows another dictionary's or
    another model's dashboards as its own features'.

    Raises:
        ValueError: a folder of another model or dictionary, or one that does not say (no ``run.json``).
    """
    from interp.sae.dashboards.identity import fingerprint, kind
    from interp.sae.dashboards.reading import as_dictionary
    from interp.store.meta import model_fingerprint

    folder = resolve(dashboards)
    run = Scan(folder).run()
    if run is None or not isinstance(run.get("model"), dict) or not isinstance(run.get("dictionary"), dict):
        raise ValueError(
            f"--dashboards {folder} has no {RUN} saying which model and dictionary made it; write them again: "
            "interp dashboards MODEL --dictionary DIR --out DIR"
        )
    view = as_dictionary(dictionary)
    mine = {
        "model": (getattr(model.cfg, "name", None), model_fingerprint(model)),
        "dictionary": (kind(view), fingerprint(view)),
    }
    for what, (name, print_) in mine.items():
        stored = run[what]
        if stored.get("fingerprint") != print_:
            made = stored.get("name") or stored.get("kind") or "unnamed"
            raise ValueError(
                f"--dashboards {folder} shows the features of another {what}: {made} (fingerprint "
                f"{str(stored.get('fingerprint'))[:12]}), not this one ({name or 'unnamed'}, {print_[:12]}); "
                f"pass the dashboards of this {what}, or write them: interp dashboards MODEL --dictionary DIR "
                "--out DIR"
            )
    return folder


def check_link(out: str | os.PathLike[str], dashboards: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(dashboards folder, OUT/features/SCAN)`` once the second is free or already links the first.

    Raises:
        FileExistsError: ``OUT/features/SCAN`` is another folder.
    """
    folder = resolve(dashboards).resolve()
    target = Path(out).expanduser() / "features" / folder.name
    if (target.exists() or target.is_symlink()) and target.resolve() != folder:
        raise FileExistsError(
            f"{target} already holds other dashboards; write the graph to another --out, or the dashboards "
            "under another --scan"
        )
    return folder, target


def link(out: str | os.PathLike[str], dashboards: str | os.PathLike[str]) -> str:
    """Make the dashboards at ``dashboards`` visible as ``OUT/features/SCAN``; returns ``SCAN``.

    Raises:
        FileExistsError: ``OUT/features/SCAN`` is another folder.
    """
    folder, target = check_link(out, dashboards)
    scan = folder.name
    if target.exists() or target.is_symlink():
        return scan
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(folder, target_is_directory=True)
    return scan


def records_of(
    folder: str | os.PathLike[str], features: list[tuple[int, int]]
) -> dict[tuple[int, int], FeatureFile]:
    """``(layer, feature) -> file`` for the features whose files are in the dashboards folder."""
    found = Scan(Path(folder)).files(FeatureId(layer, feature) for layer, feature in features)
    return {(fid.layer, fid.feature): file for fid, file in found.items()}
