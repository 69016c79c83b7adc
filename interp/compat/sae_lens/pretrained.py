"""``SAE.from_pretrained(release, sae_id)`` without a hub: the release found on this machine.

SAELens maps a release name (``"gpt2-small-res-jb"``) to a Hugging Face repository through its directory of
pretrained SAEs and downloads the SAE. interp downloads nothing, so the release must already be here, as

1. a folder: the SAE is ``release/sae_id`` (a release's layout, one folder per SAE id, as in the repository),
   or ``release`` itself when it is one SAE's folder and ``sae_id`` is its folder name or hook name;
2. a Hugging Face repository id (``owner/name``) already in the local Hugging Face cache (downloaded before by
   SAELens or ``huggingface_hub``): ``sae_id``'s folder in the cached snapshot.

A SAELens release name is therefore changed to the folder (or repository id) holding the release, and the
``sae_id`` stays as written. Anything else is refused with one line that says what was looked for.
"""

from __future__ import annotations

import json
from pathlib import Path

CFG = "cfg.json"


def resolve(release: str, sae_id: str) -> Path:
    """The folder of SAE ``sae_id`` in ``release`` (see the module docstring).

    Raises:
        FileNotFoundError: the release is neither a folder here nor a cached repository, or it has no
            ``sae_id``.
    """
    root = Path(release).expanduser()
    if root.is_dir():
        return _in_folder(root, sae_id, release)
    cached = _cached_snapshot(release)
    if cached is not None:
        return _in_folder(cached, sae_id, release)
    raise FileNotFoundError(
        f"SAE release {release!r} is not a folder on this machine nor a Hugging Face repository in the local "
        f"cache, and interp does not download: give the folder that holds the release (with {sae_id!r} "
        "inside), or load one SAE with SAE.load_from_disk(path)"
    )


def _in_folder(root: Path, sae_id: str, release: str) -> Path:
    if sae_id and (root / sae_id).is_dir():
        return root / sae_id
    if (root / CFG).is_file() and sae_id in (None, "", root.name, _hook_name(root / CFG)):
        return root
    inside = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    shown = ", ".join(inside[:8]) + (", ..." if len(inside) > 8 else "")
    raise FileNotFoundError(
        f"SAE release {release!r} ({root}) has no SAE {sae_id!r}; its SAE folders are: {shown or 'none'}"
    )


def _hook_name(config: Path) -> str | None:
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else raw
    return meta.get("hook_name") or meta.get("hook_point")


def _cached_snapshot(release: str) -> Path | None:
    """The local snapshot of a Hugging Face repository id, or ``None`` (never a download)."""
    if release.count("/") != 1:
        return None
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return None
    try:
        return Path(snapshot_download(release, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None
