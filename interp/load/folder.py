"""Reading a Hugging Face model folder: ``config.json`` and the safetensors weights, single or sharded.

Only safetensors are read: a ``pytorch_model.bin`` is a pickle, and unpickling can run arbitrary code.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

_HELP = (
    "a model folder needs config.json, model.safetensors (or shards and model.safetensors.index.json) "
    "and tokenizer.json"
)


def read_folder(folder: Path) -> tuple[HFConfig, TensorSource]:
    """``config.json`` and every tensor of a model folder.

    Raises:
        FileNotFoundError: a file is missing (the message lists what a folder needs).
        CheckpointError: invalid JSON, or a truncated or corrupt safetensors file.
    """
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{folder} has no config.json; {_HELP}")
    try:
        values = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{config_path} is not valid JSON ({err})") from err
    if not isinstance(values, dict):
        raise CheckpointError(f"{config_path} should hold a JSON object, not {type(values).__name__}")
    return HFConfig(values, str(config_path)), TensorSource(_read_weights(folder), str(folder))


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    index_path = folder / "model.safetensors.index.json"
    if index_path.is_file():
        return _read_shards(folder, index_path)
    single = folder / "model.safetensors"
    if single.is_file():
        return read_safetensors(single)
    if (folder / "pytorch_model.bin").is_file():
        raise CheckpointError(
            f"{folder} has only pytorch_model.bin, a pickle, which this loader never opens; re-save the "
            "model with save_pretrained(folder, safe_serialization=True)"
        )
    raise FileNotFoundError(f"{folder} has no model.safetensors or model.safetensors.index.json; {_HELP}")


def _read_shards(folder: Path, index_path: Path) -> dict[str, torch.Tensor]:
    try:
        weight_map: dict[str, str] = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise CheckpointError(
            f"{index_path} is not a valid index: it needs a 'weight_map' object ({err})"
        ) from err
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        path = folder / shard
        if not path.is_file():
            raise FileNotFoundError(f"{index_path} lists the shard {shard}, which is missing from {folder}")
        tensors.update(read_safetensors(path))
    absent = sorted(name for name in weight_map if name not in tensors)
    if absent:
        raise CheckpointError(f"{index_path} lists tensors that no shard holds: {absent[:5]}")
    return tensors


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file; a truncated or corrupt file raises naming it."""
    try:
        return load_file(path)
    except Exception as err:  # safetensors raises SafetensorError or OSError, depending on the damage
        raise CheckpointError(
            f"{path} is not a readable safetensors file; it is probably truncated or corrupt ({err}). "
            "Copy or save it again"
        ) from err
