"""The files of one dictionary's dashboards: ``OUT/features/SCAN/``, laid out for circuit-tracer's server.

```
OUT/features/SCAN/run.json           what this run is (model, dictionary, data, settings): written first
OUT/features/SCAN/.partial.safetensors   the pass's tables and progress, while it runs (a checkpoint)
OUT/features/SCAN/<featureIndex>.json    one feature, circuit-tracer's feature-file schema
OUT/features/SCAN/index.json         every feature written (layer, feature, featureIndex, density, act_max):
                                     written last, so its presence means the folder is complete
OUT/features/SCAN/index.html         the standalone dashboard page
```

circuit-tracer's local server serves ``OUT`` under ``/data/``, and its page loads a clicked feature from
``${scan}/${featureIndex}.json`` when the graph's ``metadata.scan`` starts with ``./``: a graph in ``OUT`` names
``./data/features/SCAN``. Every file is written atomically; the feature files without an fsync each (one
costs milliseconds, and there is one per feature), made durable by one ``os.sync`` before ``index.json``.

A folder is continued only by a run of the same identity (:mod:`interp.resumable` claims it); any other is
refused before the pass starts, naming what differs, so nothing written is lost. Reading a finished folder is
:mod:`.reader`'s.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from interp.atomic import write_atomic
from interp.resumable import Layout, Stage, State, claim
from interp.sae.dashboards.schema import FeatureFile

FORMAT = "interp-dashboards/1"
RUN, INDEX, PAGE, STATE = "run.json", "index.json", "index.html", ".partial.safetensors"
_SCAN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class DashboardMismatchError(ValueError):
    """A dashboards folder holds another run's files."""


LAYOUT = Layout(
    record=RUN,
    what="a dashboards folder",
    other="another run's dashboards",
    remedy="pass another --scan or --out",
    elsewhere="pass another --scan or --out",
    flag=None,
    error=DashboardMismatchError,
)
"""How a dashboards folder keeps its record (:mod:`interp.resumable`): ``run.json``, the run's identity."""


def check_scan(scan: str, flag: str = "--scan") -> str:
    """``scan`` if it is a usable file name (letters, digits, ``.``, ``_``, ``-``; not starting with a dot);
    ``flag`` names it in the error (a graph's ``--slug`` is checked the same way)."""
    if not isinstance(scan, str) or not _SCAN.fullmatch(scan):
        raise ValueError(
            f"{flag} {scan!r} is not a usable name: use letters, digits, '.', '_' or '-' (at most 100, not "
            "starting with '.' or '-'), such as 'smollm2-transcoders'"
        )
    return scan


def default_scan(path: str | os.PathLike[str]) -> str:
    """A scan name from a dictionary's path: its folder's name, with other characters replaced by ``-``."""
    name = (
        re.sub(r"[^A-Za-z0-9._-]+", "-", Path(path).expanduser().resolve().name).strip(".-") or "dictionary"
    )
    return name[:100]


class DashboardFolder:
    """``OUT/features/SCAN``: its state, and writing its files."""

    def __init__(self, out: str | os.PathLike[str], scan: str) -> None:
        self.out = Path(out).expanduser()
        self.scan = check_scan(scan)
        self.root = self.out / "features" / scan

    @property
    def complete(self) -> bool:
        return (self.root / INDEX).is_file()

    def feature_path(self, index: int) -> Path:
        return self.root / f"{index}.json"

    def claim(self, identity: dict[str, Any]) -> State:
        """Check the folder against this run; ``"new"``, ``"resume"`` or ``"complete"``; write ``run.json``.

        Raises:
            DashboardMismatchError: another run's dashboards, or other files, are there.
        """
        if self.out.exists() and not self.out.is_dir():
            raise DashboardMismatchError(f"--out {self.out} is a file; give a folder")
        layout = replace(LAYOUT, remedy=f"pass another --scan or --out, or delete {self.root} to start over")

        def stage(record: dict[str, Any]) -> Stage:
            if self.complete:
                return Stage("complete")
            return Stage("resume" if (self.root / STATE).is_file() else "new")

        return claim(self.root, identity, layout, stage=stage, write=lambda: identity).state

    def save_state(self, tensors: dict[str, torch.Tensor], extra: dict[str, Any]) -> None:
        """Checkpoint the pass: its tables and ``extra`` (progress, the token table) in one atomic file."""
        from interp.store.files import write_safetensors

        cpu = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
        write_safetensors(self.root / STATE, cpu, {"extra": json.dumps(extra)})

    def load_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The tables and ``extra`` of the last checkpoint."""
        from safetensors import safe_open
        from safetensors.torch import load_file

        path = self.root / STATE
        with safe_open(str(path), "pt") as f:
            extra = json.loads((f.metadata() or {})["extra"])
        return load_file(str(path)), extra

    def write_feature(self, file: FeatureFile) -> None:
        text = file.to_json()
        write_atomic(self.feature_path(file.index), lambda tmp: tmp.write_text(text, "utf-8"), sync=False)

    def finish(self, index: dict[str, Any], page: str) -> None:
        """Make the feature files durable, write the page, then ``index.json`` (the folder is complete), and
        drop the checkpoint."""
        os.sync()
        write_atomic(self.root / PAGE, lambda tmp: tmp.write_text(page, "utf-8"))
        text = json.dumps(index, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        write_atomic(self.root / INDEX, lambda tmp: tmp.write_text(text + "\n", "utf-8"))
        (self.root / STATE).unlink(missing_ok=True)
