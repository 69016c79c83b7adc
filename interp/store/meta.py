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


def model_record(model: Any) -> dict[str, Any]:
    """The model as a store's identity records it: name, config, dtype and a fingerprint of its weights and
    tokenizer. (A steering vector records its model otherwise, by a few embedding rows:
    :func:`interp.analysis.steering_checks.model_identity`.)"""
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


def describe_difference(key: str, stored: Any, wanted: Any) -> str | None:
    """How a store's message names a difference in ``key`` where the plain ``key was OLD, now NEW`` reads
    worse (the model, by name, dtype and fingerprint; the number of ranks); ``None`` for every other field."""
    if key == "model" and stored and wanted:

        def label(m: dict) -> str:
            fingerprint = m.get("fingerprint", "")[:12]
            return f"{m.get('name') or 'unnamed'} ({m.get('dtype')}, fingerprint {fingerprint})"

        return f"it was written by model {label(stored)}, this run uses {label(wanted)}"
    if key == "world_size":
        return f"it was written by {stored} rank(s), this run has {wanted}; rerun with the same number"
    return None
