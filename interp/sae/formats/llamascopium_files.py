"""The files of a llamascopium folder: their names, how they are read, and the conventions every kind shares
(feature count, activation scales, gating, JumpReLU thresholds, checked tensors, hook names).

:mod:`.llamascopium` reads SAEs, transcoders and CLTs from them and :mod:`.llamascopium_lorsa` Lorsas; both
import what they share from here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from interp.sae.formats.build import SAEFormatError

CONFIG = "config.json"
WEIGHTS = "sae_weights.safetensors"
NORM_PREFIX = "dataset_average_activation_norm."
KINDS = ("lorsa", "sae", "clt")


def is_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a llamascopium ``config.json`` (one naming its ``sae_type``) and weights."""
    config = folder / CONFIG
    if not config.is_file() or not (folder / WEIGHTS).is_file():
        return False
    try:
        return "sae_type" in json.loads(config.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def read(folder: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The config and the tensors of a folder."""
    config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    kind = config.get("sae_type")
    if kind not in KINDS:
        raise SAEFormatError(
            f"{folder / CONFIG} has sae_type={kind!r}; interp reads llamascopium's {list(KINDS)} (crosscoders "
            "and MoLTs are not read)"
        )
    return config, load_file(folder / WEIGHTS)


def d_sae(config: dict[str, Any]) -> int:
    """The feature count, as llamascopium derives it: ``int(d_model * expansion_factor)``."""
    return int(config["d_model"] * config["expansion_factor"])


def scales(
    config: dict[str, Any], tensors: dict[str, torch.Tensor], hooks: list[str], source: str
) -> list[float]:
    """``f = sqrt(d_model) / norm`` per hook, the factor activations were multiplied by in training (1 for
    ``norm_activation: "inference"``)."""
    mode = config.get("norm_activation", "dataset-wise")
    if mode == "inference":
        return [1.0] * len(hooks)
    if mode != "dataset-wise":
        raise SAEFormatError(
            f"{source}: norm_activation={mode!r} scales each activation by its own norm, so an output cannot be "
            "put back in the model's units without the target it predicts; only 'dataset-wise' and 'inference' "
            "dictionaries can be read"
        )
    out = []
    for hook in hooks:
        norm = tensors.get(NORM_PREFIX + hook)
        value = None if norm is None or norm.numel() != 1 else float(norm)
        if value is None or not math.isfinite(value) or value <= 0:
            raise SAEFormatError(
                f"{source}: norm_activation='dataset-wise' but {NORM_PREFIX}{hook} is "
                f"{'missing' if norm is None else repr(value)}; the dataset's average norm is needed to undo the "
                "scaling (save with fold_activation_scale=True, or give the folder its norms)"
            )
        out.append(math.sqrt(config["d_model"]) / value)
    return out


def gated(config: dict[str, Any]) -> bool:
    """Whether features are chosen by ``pre * |W_D[f]|`` (llamascopium's default is yes)."""
    return bool(config.get("sparsity_include_decoder_norm", True))


def threshold(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """JumpReLU's threshold, ``exp`` of the stored log (in the stored dtype, as llamascopium computes it)."""
    return tensors["activation_function.log_jumprelu_threshold"].exp().double()


def tensor(tensors: dict[str, torch.Tensor], name: str, shape: tuple[int, ...], source: str) -> torch.Tensor:
    """``tensors[name]`` checked against the shape the config implies."""
    if name not in tensors:
        raise SAEFormatError(
            f"{source} has no tensor {name!r}; its config implies one of shape {list(shape)}"
        )
    got = tensors[name]
    if tuple(got.shape) != shape:
        raise SAEFormatError(
            f"{source}: {name} has shape {list(got.shape)}, but the config implies {list(shape)}"
        )
    return got.double()


def layer_site(hook: str, source: str) -> tuple[int, str]:
    """``(layer, site)`` of a TransformerLens name ``blocks.L.SITE``."""
    parts = hook.split(".", 2)
    if len(parts) != 3 or parts[0] != "blocks" or not parts[1].isdigit():
        raise SAEFormatError(f"{source}: hook {hook!r} is not of the form blocks.LAYER.SITE")
    return int(parts[1]), parts[2]
