"""The SAELens format: a folder with ``cfg.json`` and ``sae_weights.safetensors``.

Reading follows SAELens's own loader. Configs written before SAELens 6.0 (no ``sae_lens_version``, or one below
6.0) name things differently: ``hook_point`` for ``hook_name``, ``activation_fn_str`` for ``activation_fn``,
TopK as ``activation_fn: "topk"`` with ``activation_fn_kwargs: {"k": ...}``, ``normalize_activations`` as a
bool; they are renamed first, as SAELens's ``handle_pre_6_0_config`` does. 6.x configs keep the model and hook
in a ``metadata`` object. A ``scaling_factor`` tensor of ones is dropped; any other is the pre-6.0 fine-tuning
scale, applied to the latents before decoding. ``expected_average_only_in`` normalisation is a constant SAELens
folds in when it knows it: pass ``norm_scaling_factor`` to :func:`interp.sae.load` to do the same.

TopK and JumpReLU pass the values they keep through a ReLU (SAELens 6's ``TopK`` applies ``relu`` to what
``torch.topk`` keeps; ``JumpReLUSAE.encode`` is ``relu(pre) * (pre > threshold)``): :class:`~interp.sae.SAE`'s
convention, ``rectify=True`` in :mod:`interp.sae.activation`.

Writing produces the 6.x layout: a BatchTopK SAE is written as JumpReLU with its threshold (as SAELens
saves them for inference), and a fine-tuning scale is folded into ``W_dec``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from interp.sae.config import SAEConfig
from interp.sae.formats.build import build_sae, config_error, rebuilt
from interp.sae.module import SAE
from interp.store.files import write_json, write_safetensors

CFG = "cfg.json"
WEIGHTS = "sae_weights.safetensors"
FORMAT_VERSION = "6.0.0"  # the config layout written: SAELens reads it as a 6.x config

_PRE_6_RENAMES = {
    "hook_point": "hook_name",
    "hook_point_head_index": "hook_head_index",
    "activation_fn_str": "activation_fn",
}
_ARCHITECTURES = {
    "standard": ("standard", False, False),
    "topk": ("topk", False, False),
    "jumprelu": ("jumprelu", False, False),
    "batchtopk": ("batchtopk", False, False),
    "transcoder": ("standard", True, False),
    "skip_transcoder": ("standard", True, True),
    "jumprelu_transcoder": ("jumprelu", True, False),
}


def _version_below_6(version: str | None) -> bool:
    if not version:
        return True
    head = version.split(".")[0].lstrip("v")
    return not head.isdigit() or int(head) < 6


def normalise_config(raw: dict[str, Any]) -> dict[str, Any]:
    """A SAELens ``cfg.json`` of any version as one flat dict of 6.x names (metadata merged in)."""
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    version = raw.get("sae_lens_version") or meta.get("sae_lens_version")
    cfg = {**meta, **{k: v for k, v in raw.items() if k != "metadata"}}
    if _version_below_6(version):
        cfg = {_PRE_6_RENAMES.get(k, k): v for k, v in cfg.items()}
        cfg.setdefault("apply_b_dec_to_input", True)
        cfg.setdefault("finetuning_scaling_factor", False)
        cfg.setdefault("architecture", "standard")
        cfg.setdefault("activation_fn", "relu")
        cfg.setdefault(
            "reshape_activations", "hook_z" if "hook_z" in (cfg.get("hook_name") or "") else "none"
        )
        kwargs = cfg.get("activation_fn_kwargs") or {}
        if cfg.get("activation_fn") == "topk" and kwargs.get("k") is not None:
            cfg["architecture"], cfg["k"] = "topk", kwargs["k"]
        if isinstance(cfg.get("normalize_activations"), bool):
            cfg["normalize_activations"] = (
                "expected_average_only_in" if cfg["normalize_activations"] else "none"
            )
    if cfg.get("normalize_activations") is None:
        cfg["normalize_activations"] = "none"
    return cfg


def load(
    folder: Path, *, device: Any = None, dtype: Any = None, norm_scaling_factor: float | None = None
) -> SAE:
    """Load a SAELens folder (see the module docstring)."""
    raw = json.loads((folder / CFG).read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise config_error(f"{folder / CFG} holds a JSON {type(raw).__name__}, not a SAELens config object")
    cfg = normalise_config(raw)
    arch = cfg.get("architecture", "standard")
    if arch not in _ARCHITECTURES:
        raise config_error(
            f"{folder}: SAELens architecture {arch!r} is not supported; supported: {sorted(_ARCHITECTURES)}"
        )
    activation, transcoder, skip = _ARCHITECTURES[arch]
    fn = cfg.get("activation_fn", "relu")
    if fn not in ("relu", "topk", None):
        raise config_error(f"{folder}: activation_fn {fn!r} is not supported (only relu and topk)")
    tensors = load_file(folder / WEIGHTS)
    finetune = bool(cfg.get("finetuning_scaling_factor"))
    scale = tensors.pop("scaling_factor", None)
    if scale is not None and not torch.equal(scale, torch.ones_like(scale)):
        if not finetune:
            raise config_error(
                f"{folder}: the weights hold a scaling_factor that is not all ones, but cfg.json has "
                "finetuning_scaling_factor false; one of the two files is from another SAE"
            )
        tensors["finetuning_scaling_factor"] = scale
    else:
        finetune = False
    if "log_threshold" in tensors:  # a training checkpoint: SAELens stores exp(log_threshold) for inference
        tensors["threshold"] = tensors.pop("log_threshold").exp()
    for key in ("d_in", "d_sae"):
        if key not in cfg:
            raise config_error(f"{folder / CFG} has no {key!r}; a SAELens config names d_in and d_sae")
    config = SAEConfig(
        d_in=cfg["d_in"],
        d_sae=cfg["d_sae"],
        architecture=activation,
        k=cfg.get("k"),
        transcoder=transcoder,
        d_out=cfg.get("d_out") if transcoder else None,
        hook_name=cfg.get("hook_name"),
        hook_name_out=cfg.get("hook_name_out") if transcoder else None,
        apply_b_dec_to_input=bool(cfg.get("apply_b_dec_to_input", True)) and not transcoder,
        normalize_activations=cfg["normalize_activations"],
        rescale_acts_by_decoder_norm=bool(cfg.get("rescale_acts_by_decoder_norm", False)),
        reshape_activations=cfg.get("reshape_activations") or "none",
        skip=skip,
        finetuning_scaling_factor=finetune,
        dtype=_dtype_name(cfg.get("dtype")),
        model_name=cfg.get("model_name"),
        metadata={"format": "saelens", **{k: v for k, v in raw.items() if k not in ("d_in", "d_sae")}},
    )
    sae = build_sae(config, tensors, str(folder / WEIGHTS), device=device, dtype=dtype)
    if config.normalize_activations == "expected_average_only_in":
        if norm_scaling_factor is None:
            warnings.warn(
                f"{folder}: normalize_activations is 'expected_average_only_in' but the folder does not hold "
                "the scaling factor; inputs are used unscaled (as SAELens's load_from_disk does). Pass "
                "norm_scaling_factor=... to fold it in",
                stacklevel=3,
            )
        else:
            sae = _fold_norm(sae, norm_scaling_factor)
    return sae


def _fold_norm(sae: SAE, factor: float) -> SAE:
    """SAELens's ``fold_activation_norm_scaling_factor``: ``W_enc * f``, ``W_dec / f``, ``b_dec / f``."""
    with torch.no_grad():
        sae.W_enc.mul_(factor)
        sae.W_dec.div_(factor)
        sae.b_dec.div_(factor)
    return rebuilt(sae, normalize_activations="none")


def _dtype_name(value: Any) -> str:
    if value is None:
        return "float32"
    name = str(value).removeprefix("torch.")
    if name not in ("float32", "float64", "float16", "bfloat16"):
        raise config_error(f"dtype {value!r} is not a floating dtype")
    return name


def save(sae: SAE, folder: str | Path) -> Path:
    """Write ``sae`` as a SAELens 6.x folder and return its path."""
    c = sae.cfg
    state = {k: v.detach().cpu().contiguous() for k, v in sae.state_dict().items()}
    if c.finetuning_scaling_factor:
        scale = state.pop("finetuning_scaling_factor")
        state["W_dec"] = (state["W_dec"] * scale[:, None]).contiguous()
    architecture = {"standard": "standard", "topk": "topk", "jumprelu": "jumprelu", "batchtopk": "jumprelu"}[
        c.architecture
    ]
    if c.transcoder:
        if architecture == "topk":
            raise config_error("SAELens has no TopK transcoder; save a standard or JumpReLU transcoder")
        architecture = "skip_transcoder" if c.skip else f"{architecture}_transcoder".replace("standard_", "")
    elif c.skip:
        raise config_error("SAELens has no skip connection on autoencoders; only skip transcoders")
    keep = {k: v for k, v in c.metadata.items() if k not in ("format",)} if c.metadata else {}
    metadata = {
        **(keep.get("metadata") if isinstance(keep.get("metadata"), dict) else {}),
        "model_name": c.model_name,
        "hook_name": c.hook_name,
        "sae_lens_version": FORMAT_VERSION,
        "sae_lens_training_version": None,
    }
    if c.transcoder:
        metadata["hook_name_out"] = c.hook_name_out
    if c.architecture == "batchtopk":
        metadata["trained_as"] = {"architecture": "batchtopk", "k": c.k}
    cfg: dict[str, Any] = {
        "architecture": architecture,
        "d_in": c.d_in,
        "d_sae": c.d_sae,
        "dtype": c.dtype,
        "device": "cpu",
        "apply_b_dec_to_input": c.apply_b_dec_to_input,
        "normalize_activations": c.normalize_activations,
        "reshape_activations": c.reshape_activations,
        "metadata": metadata,
    }
    if architecture == "topk":
        cfg["k"] = c.k
        cfg["rescale_acts_by_decoder_norm"] = c.rescale_acts_by_decoder_norm
    if c.transcoder:
        cfg["d_out"] = c.width_out
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / WEIGHTS, state, {})
    write_json(folder / CFG, cfg)
    return folder
