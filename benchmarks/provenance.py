"""What a benchmark's JSON holds besides its figures, and how a re-run is kept beside the runs before it.

A timing on a shared machine means little without the versions it compared, the threads it ran on and the load
it ran under. Every script's ``--out`` goes through :func:`write_run`: the file is ``{"runs": [...]}``, each run
``{"figures": ..., "environment": ...}`` (:func:`environment` taken when it started, plus the load when it
ended, and the commit of the code), and a new run is appended, never written over, so re-runs that disagree
stay side by side in the file the README quotes.

Runs written before this module were gathered from the files' history, each with the commit that held it; their
``environment`` says which fields they lack (``missing``): those cannot be measured after the fact, so they are
not filled in.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FIELDS = ("versions", "threads", "machine", "load_start", "load_end")
"""What every run records; a run lacking some lists them under ``missing``."""

_VERSION_SCRIPT = """
import json, sys
from importlib import metadata
out = {"python": sys.version.split()[0]}
for name in sys.argv[1:]:
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


def versions(libraries: Sequence[str], python: str | None = None) -> dict[str, str | None]:
    """Installed versions of ``libraries`` (None where one is absent), and Python's; with ``python``, those of
    that interpreter's environment (a reference library that runs in a virtual environment of its own)."""
    command = [python or sys.executable, "-c", _VERSION_SCRIPT, *libraries]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def environment(
    libraries: Sequence[str] = (), others: dict[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """The run's versions, threads, machine and load now (call it when the run starts).

    Args:
        libraries: packages compared or used in this interpreter (torch and interp are always recorded).
        others: ``{interpreter: packages}`` for libraries run in other environments; recorded under the
            environment's folder name, not the interpreter's path (a path on one machine means nothing on
            another).
    """
    import torch

    here = versions(["torch", "interp", *libraries])
    here["interp_commit"] = _commit()
    env = {"versions": here, "threads": _threads(torch), "machine": _machine(), "load_start": os.getloadavg()}
    if others:
        env["versions_elsewhere"] = {
            _environment_name(python): versions(list(libs), python) for python, libs in others.items()
        }
    return env


def write_run(path: str | os.PathLike[str], figures: dict[str, Any], env: dict[str, Any]) -> None:
    """Append one run (``figures`` and ``env``, plus the load now) to the runs in ``path``.

    Absolute paths among the figures (a script's arguments: a reference interpreter, a data file) are kept as
    their last component, so the stored runs name no folder of the machine that ran them.
    """
    path = Path(path)
    runs = read_runs(path) if path.exists() else []
    runs.append({"figures": _portable(figures), "environment": {**env, "load_end": os.getloadavg()}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"runs": runs}, indent=1) + "\n")


def read_runs(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The runs a results file holds; a file in the older layout (one run's figures alone) is that one run."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, dict) and set(data) == {"runs"}:
        return data["runs"]
    return [{"figures": data, "environment": {"missing": list(FIELDS)}}]


def missing(run: dict[str, Any]) -> list[str]:
    """The fields of :data:`FIELDS` that ``run`` does not record."""
    env = run.get("environment", {})
    return [f for f in FIELDS if f not in env]


def _threads(torch) -> dict[str, Any]:
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    return {
        "torch_intra_op": torch.get_num_threads(),
        "torch_inter_op": torch.get_num_interop_threads(),
        **{name: os.environ.get(name) for name in names},
    }


def _machine() -> dict[str, Any]:
    model = None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), None)  # fmt: skip
    return {"arch": platform.machine(), "cpu": model, "cpus": os.cpu_count(), "system": platform.system()}


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def _environment_name(python: str) -> str:
    """``.../venv-circuit-tracer/bin/python`` -> ``venv-circuit-tracer``: the environment, not where it lies."""
    parts = Path(python).parts
    return parts[-3] if len(parts) >= 3 and parts[-2] == "bin" else Path(python).name


def _portable(value: Any) -> Any:
    """``value`` with every absolute path replaced by its last component, through dicts and lists."""
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_portable(v) for v in value]
    if isinstance(value, str) and os.path.isabs(value):
        return _environment_name(value)
    return value
