"""Reading a Hugging Face model folder: ``config.json`` and the safetensors weights, single or sharded.

The weights are, in this order: the shards listed by ``model.safetensors.index.json``; ``model.safetensors``;
or the folder's only ``*.safetensors`` file, whatever its name (logged at INFO on the ``interp.load`` logger,
and named in every error about its tensors). Several unindexed safetensors files are refused, naming them:
which of them make up the model is not for the loader to guess. Only safetensors are read: a
``pytorch_model.bin`` is a pickle, and unpickling can run arbitrary code.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors.torch import load_file

from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig
from interp.load.tensors import TensorSource

_HELP = (
    "a model folder needs config.json, the weights (model.safetensors, one *.safetensors file of any name, "
    "or shards listed in model.safetensors.index.json) and tokenizer.json"
)
_LOG = logging.getLogger("interp.load")


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
    tensors, source = _read_weights(folder)
    return HFConfig(values, str(config_path)), TensorSource(tensors, source)


def _read_weights(folder: Path) -> tuple[dict[str, torch.Tensor], str]:
    """The tensors, and what to call their source in messages (the folder, or the one file read)."""
    index_path = folder / "model.safetensors.index.json"
    if index_path.is_file():
        return _read_shards(folder, index_path), str(folder)
    single = folder / "model.safetensors"
    if single.is_file():
        return read_safetensors(single), str(folder)
    found = sorted(p.name for p in folder.glob("*.safetensors") if p.is_file())
    if len(found) == 1:
        path = folder / found[0]
        _LOG.info(
            "%s has no model.safetensors; reading the weights from its only safetensors file, %s",
            folder,
            path.name,
        )
        return read_safetensors(path), str(path)
    if len(found) > 1:
        raise CheckpointError(
            f"{folder} has several safetensors files ({', '.join(found)}) and no "
            "model.safetensors.index.json to say which hold the model; name the model's file "
            "model.safetensors, keep only it, or add the index"
        )
    if (folder / "pytorch_model.bin").is_file():
        raise CheckpointError(
            f"{folder} has only pytorch_model.bin, a pickle, which this loader never opens; re-save the "
            "model with save_pretrained(folder, safe_serialization=True)"
        )
    raise FileNotFoundError(f"{folder} has no model.safetensors nor any other *.safetensors file; {_HELP}")


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
