"""A disk cache of converted GGUF checkpoints, so only the first load pays for dequantizing.

Entries are safetensors files (never pickles) in ``$INTERP_CACHE``, else ``$XDG_CACHE_HOME/interp``, else
``~/.cache/interp``. Each is keyed by the SHA-256 of the source file's bytes plus :data:`FORMAT` (bump it when
a conversion changes), and holds the converted state dict, with the config and the tokenizer as JSON in the
header. Each tensor is stored in its memory order (a transposed weight as the transpose, with the permutation
in the header) and read back as the same view, so the model takes the tensors over without copying them.
Hashing 100 MB takes a fraction of a second, still too long to repeat on each load, so digests are
remembered by (path, size, mtime). Files are written under a temporary name and renamed, so a reader never
sees half an entry; a damaged entry is deleted and rebuilt; a cache that cannot be written only warns.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from interp.atomic import write_atomic
from interp.config import TransformerConfig
from interp.load.assign import inverse_order, storage_order
from interp.tokens import Tokenizer

FORMAT = "3"  # 2: tensors stored in their memory order, so loading assigns them without a copy; 3: the chat template
_CHUNK = 1 << 20


def cache_dir() -> Path:
    """The cache folder (it may not exist yet)."""
    if os.environ.get("INTERP_CACHE"):
        return Path(os.environ["INTERP_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "interp"
    return Path.home() / ".cache" / "interp"


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, remembered by (resolved path, size, mtime)."""
    stat = path.stat()
    key = str(path.resolve())
    digests_path = cache_dir() / "sha256.json"
    digests = _read_digests(digests_path)
    entry = digests.get(key)
    if entry and entry.get("size") == stat.st_size and entry.get("mtime_ns") == stat.st_mtime_ns:
        return entry["sha256"]
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    digests[key] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest.hexdigest()}
    try:
        _write_atomic(
            digests_path, lambda tmp: tmp.write_text(json.dumps(digests, indent=1), encoding="utf-8")
        )
    except OSError as err:
        warnings.warn(f"could not record a file digest in {digests_path}: {err}", stacklevel=2)
    return digest.hexdigest()


def entry_path(digest: str) -> Path:
    """Where the converted checkpoint for a source with this digest is stored."""
    return cache_dir() / "checkpoints" / f"{digest}-v{FORMAT}.safetensors"


def read_entry(digest: str) -> tuple[TransformerConfig, dict[str, torch.Tensor], Tokenizer] | None:
    """The cached ``(config, state dict, tokenizer)``, or ``None`` if absent (or damaged, then deleted)."""
    path = entry_path(digest)
    if not path.is_file():
        return None
    try:
        with safe_open(path, framework="pt") as f:
            meta = f.metadata()
            state = {name: f.get_tensor(name) for name in f.keys()}
        for name, order in json.loads(meta["orders"]).items():
            state[name] = state[name].permute(inverse_order(order))  # the layout it was converted in
        cfg = TransformerConfig(**json.loads(meta["config"]))
        return cfg, state, Tokenizer.from_json(meta["tokenizer"])
    except Exception as err:  # any damage means: rebuild
        warnings.warn(f"ignoring a damaged cache entry {path} ({err}); it will be rebuilt", stacklevel=2)
        path.unlink(missing_ok=True)
        return None


def write_entry(
    digest: str, cfg: TransformerConfig, state: dict[str, torch.Tensor], tokenizer: Tokenizer
) -> None:
    """Store a converted checkpoint; warns instead of failing if the cache cannot be written."""
    path = entry_path(digest)
    meta = {"format": FORMAT, "config": json.dumps(cfg.to_dict()), "tokenizer": tokenizer.to_json()}
    tensors, seen, orders = {}, set(), {}
    for name, tensor in state.items():  # safetensors refuses tensors that share memory
        order = storage_order(tensor.detach())
        if order != sorted(order):
            orders[name] = order
        tensor = tensor.detach().permute(order).contiguous()  # in its memory order: no copy when dense
        tensors[name] = tensor.clone() if tensor.data_ptr() in seen else tensor
        seen.add(tensor.data_ptr())
    meta["orders"] = json.dumps(orders)
    try:
        _write_atomic(path, lambda tmp: save_file(tensors, tmp, metadata=meta))
    except OSError as err:
        warnings.warn(
            f"could not write the checkpoint cache {path}: {err}; the next load converts again", stacklevel=2
        )


def _read_digests(path: Path) -> dict[str, dict]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_atomic(path: Path, write) -> None:
    """Write through ``write(tmp)`` and rename; processes that share the cache each use their own tmp name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, write, tmp=path.with_name(f".{path.name}.{os.getpid()}.tmp"))
