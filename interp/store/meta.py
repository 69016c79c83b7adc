"""``meta.json``: what a store holds (model, hooks, positions, dtype, data) and how far it has got.

The *identity* fields must match for a run to add to an existing folder; anything else is refused rather
than mixed, because a folder of shards from two models or two hook sets reads back as plausible nonsense.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

FORMAT = "interp-activation-store/1"
META = "meta.json"
CHAIN_START = "0" * 64


class StoreMismatchError(ValueError):
    """A store folder was written by a different model, hook set, layout or data set."""


def model_identity(model: Any) -> dict[str, Any]:
    """Name, config and a fingerprint of ``model``'s weights, dtype and tokenizer."""
    return {
        "name": model.cfg.name,
        "config": model.cfg.to_dict(),
        "dtype": str(model.dtype).removeprefix("torch."),
        "fingerprint": model_fingerprint(model),
    }


def model_fingerprint(model: Any, sample: int = 4096) -> str:
    """sha256 of the config, the tokenizer, and each parameter's name, shape, dtype and first values.

    Sampling keeps this cheap for large models while any different checkpoint or seed changes it.
    """
    h = hashlib.sha256(json.dumps(model.cfg.to_dict(), sort_keys=True, default=str).encode())
    for name, param in model.named_parameters():
        h.update(f"{name}:{tuple(param.shape)}:{param.dtype}".encode())
        head = param.detach().reshape(-1)[:sample].cpu().contiguous()
        h.update(head.view(torch.uint8).numpy().tobytes())
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and hasattr(tokenizer, "to_json"):
        fields = json.loads(tokenizer.to_json())
        fields.pop("name", None)  # a label (often the path it was loaded from), not part of the tokenization
        h.update(json.dumps(fields, sort_keys=True).encode())
    return h.hexdigest()


def chain(previous: str, digest: bytes) -> str:
    """The running data fingerprint after one more batch."""
    return hashlib.sha256(bytes.fromhex(previous) + digest).hexdigest()


def read_meta(folder: Path) -> dict[str, Any] | None:
    """The folder's ``meta.json``, or ``None`` when there is none."""
    path = folder / META
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise StoreMismatchError(f"{path} is not valid JSON ({err}); delete {folder} to start over") from err
    if not isinstance(meta, dict) or meta.get("identity", {}).get("format") != FORMAT:
        raise StoreMismatchError(f"{path} is not an activation store's meta.json (format {FORMAT})")
    return meta


def check_identity(folder: Path, stored: dict[str, Any], wanted: dict[str, Any]) -> None:
    """Raise :class:`StoreMismatchError` naming every field in which ``folder`` differs from this run."""
    problems = [
        _describe(key, stored.get(key), wanted.get(key))
        for key in sorted(set(stored) | set(wanted))
        if stored.get(key) != wanted.get(key)
    ]
    if problems:
        raise StoreMismatchError(
            f"{folder} holds a different activation store: "
            + "; ".join(problems)
            + ". Write to another output folder, or replace it with overwrite=True (interp cache --overwrite)"
        )


def _describe(key: str, stored: Any, wanted: Any) -> str:
    if key == "model" and stored and wanted:

        def label(m: dict) -> str:
            fingerprint = m.get("fingerprint", "")[:12]
            return f"{m.get('name') or 'unnamed'} ({m.get('dtype')}, fingerprint {fingerprint})"

        return f"it was written by model {label(stored)}, this run uses {label(wanted)}"
    if key == "world_size":
        return f"it was written by {stored} rank(s), this run has {wanted}; rerun with the same number"
    return f"{key} was {_short(stored)}, this run has {_short(wanted)}"


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
