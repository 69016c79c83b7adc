"""The provenance record of a report: what produced it, from which inputs, with which software.

``manifest.json`` is the one file in a report that may differ between two runs with the same seed: it holds
the creation time and the wall time. Everything else in it (hashes of the model and data files, config, seed,
package versions, command line) is what someone needs to reproduce the report, and what
:func:`validate_manifest` checks.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

MANIFEST_SCHEMA = "interp.report.manifest/1"

VERSIONED_PACKAGES = ("torch", "numpy", "transformers", "tokenizers", "interp")
"""Distributions whose installed versions every manifest records (``None`` where one is not installed)."""

_CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks so that large checkpoints do not fill memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_path(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, or of a folder (such as a Hugging Face model folder).

    A folder's hash is the SHA-256 of ``sha256sum``-style lines (``<hash>  <relative path>``) for every file
    below it, sorted by relative path, so it changes when any file's content or name changes.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
    """
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    if not path.is_dir():
        raise FileNotFoundError(f"cannot hash {str(path)!r}: no such file or folder")
    files = sorted(p for p in path.rglob("*") if p.is_file())
    lines = "".join(f"{sha256_file(p)}  {p.relative_to(path).as_posix()}\n" for p in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def package_versions() -> dict[str, str | None]:
    """Versions of Python and of :data:`VERSIONED_PACKAGES`, read from package metadata, not by import."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def source_revision() -> dict[str, Any] | None:
    """The git commit of the ``interp`` source and whether it has uncommitted changes, if it is a checkout."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True)
    return out.stdout.strip()


def input_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"path", "sha256", "bytes"}`` for a model or data input; ``bytes`` sums a folder's files."""
    p = Path(path)
    sha = sha256_path(p)
    size = p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return {"path": str(path), "sha256": sha, "bytes": size}


def normalise_dtype(dtype: object) -> str | None:
    """``torch.float32`` or ``"float32"`` to ``"float32"``; ``None`` stays ``None``."""
    return None if dtype is None else str(dtype).removeprefix("torch.")


def build_manifest(
    *,
    title: str,
    command: Sequence[str] | None,
    seed: int | None,
    model: Mapping[str, Any] | None,
    data: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    device: str | None,
    dtype: str | None,
    wall_time_s: float,
    files: Mapping[str, str],
) -> dict[str, Any]:
    """Assemble a manifest dict; the caller has already made ``config`` JSON-able.

    Args:
        title: The report's title.
        command: The command line; ``None`` records ``sys.argv``.
        seed: The random seed the study used, or ``None`` if it used none.
        model: ``{"name", "path", "sha256", "bytes"}`` or ``None`` for a report without a model.
        data: One :func:`input_record` per data file.
        config: The study's configuration.
        device: Where the study ran, such as ``"cpu"`` or ``"cuda:0"``.
        dtype: The model's dtype name.
        wall_time_s: Seconds from the run's start (or the report's creation) to the report's writing.
        files: SHA-256 of every other file in the report, by relative path.
    """
    return {
        "schema": MANIFEST_SCHEMA,
        "title": title,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_time_s": round(wall_time_s, 3),
        "command": list(sys.argv if command is None else command),
        "seed": seed,
        "model": None if model is None else dict(model),
        "data": [dict(d) for d in data],
        "config": dict(config),
        "device": device,
        "dtype": dtype,
        "versions": package_versions(),
        "source": source_revision(),
        "platform": platform.platform(),
        "files": dict(sorted(files.items())),
    }
