"""Rotary settings from a ``config.json``, in the two spellings checkpoints use.

Folders saved by ``transformers`` 5 keep everything in ``rope_parameters`` (per layer type for Gemma 3:
``{"full_attention": {...}, "sliding_attention": {...}}``); folders from earlier versions, which are most
checkpoints on disk, have ``rope_theta``, ``rope_scaling`` (``type`` or ``rope_type``),
``partial_rotary_factor`` and family-specific keys (GPT-NeoX's ``rotary_pct`` and ``rotary_emb_base``, Gemma 3's
``rope_local_base_freq``, Phi-3's top-level ``original_max_position_embeddings``). Both read into the same
:class:`Rotary`; a scaling type or parameter this loader does not implement is refused by name, since
ignoring it would silently move every position. ``"factors"`` (explicit per-frequency divisors) is no
``transformers`` type: it is how GGUF files of Llama 3.1 carry their scaling (``rope_freqs.weight``), read into
the same config by :mod:`interp.load.gguf_hf`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interp.config import RotaryScaling
from interp.load.errors import CheckpointError
from interp.load.hf_config import HFConfig

SCALINGS = ("linear", "dynamic", "llama3", "yarn", "longrope", "factors")

# config key -> RotaryScaling field
_FIELDS = {
    "factor": "factor",
    "original_max_position_embeddings": "original_n_ctx",
    "low_freq_factor": "low_freq_factor",
    "high_freq_factor": "high_freq_factor",
    "beta_fast": "beta_fast",
    "beta_slow": "beta_slow",
    "mscale": "mscale",
    "mscale_all_dim": "mscale_all_dim",
    "attention_factor": "attention_factor",
    "truncate": "truncate",
    "long_factor": "long_factor",
    "short_factor": "short_factor",
    "factors": "factors",
}
_NOT_SCALING = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}


@dataclass(frozen=True)
class Rotary:
    """What the config says about rotary positions for one kind of layer."""

    base: float
    fraction: float
    scaling: RotaryScaling | None


def read_rotary(
    hf: HFConfig,
    layer_type: str = "full_attention",
    default_base: float = 10000.0,
    default_fraction: float = 1.0,
) -> Rotary:
    """The base, rotated fraction of each head and scaling for layers of ``layer_type``."""
    params = hf.get("rope_parameters") or {}
    if layer_type in params or "full_attention" in params:  # one entry per layer type
        params = params.get(layer_type) or {}
    legacy = hf.get("rope_scaling") or {}
    if layer_type == "sliding_attention" and "rope_parameters" not in hf.values:
        legacy = {}  # old Gemma 3 configs scale the global layers only
    if layer_type == "sliding_attention" and "rope_theta" not in params:
        base = hf.get("rope_local_base_freq", default_base)  # Gemma 3's local layers, older spelling
    else:
        base = params.get("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", default_base)))
    fraction = hf.get("partial_rotary_factor", hf.get("rotary_pct", default_fraction))
    fraction = params.get("partial_rotary_factor", fraction)
    scaling = _scaling(hf, params, legacy)
    return Rotary(float(base), float(fraction), scaling)


def _scaling(hf: HFConfig, params: dict[str, Any], legacy: dict[str, Any]) -> RotaryScaling | None:
    spec = {**legacy, **params}
    kind = spec.get("rope_type", spec.get("type", "default"))
    if kind in ("default", None):
        extra = sorted(set(spec) - _NOT_SCALING)
        if extra:
            raise CheckpointError(
                f"{hf.source}: rotary settings {extra} without a scaling type are not understood"
            )
        return None
    if kind not in SCALINGS:
        raise CheckpointError(
            f"{hf.source}: rotary scaling {kind!r} is not implemented; loading it as plain rotary would "
            f"silently change every position. Supported: 'default', {', '.join(repr(s) for s in SCALINGS)}"
        )
    unknown = sorted(set(spec) - _NOT_SCALING - set(_FIELDS))
    if unknown:
        raise CheckpointError(
            f"{hf.source}: rotary scaling {kind!r} has parameters this loader does not implement: {unknown}"
        )
    values = {_FIELDS[k]: v for k, v in spec.items() if k in _FIELDS and v is not None}
    if "original_n_ctx" not in values and hf.get("original_max_position_embeddings") is not None:
        values["original_n_ctx"] = hf.get("original_max_position_embeddings")  # Phi-3 keeps it at the top
    if kind in ("llama3", "dynamic") and "original_n_ctx" not in values:
        values["original_n_ctx"] = hf.require("max_position_embeddings")
    try:
        return RotaryScaling(kind=kind, **values)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{hf.source}: {err}") from err


def rotary_dim(rotary: Rotary, head_dim: int, source: str) -> int:
    """How many dimensions of each head rotate, for a rotated fraction of ``head_dim`` (rounded down, as
    ``transformers`` does, except where rounding error leaves a whole number a hair short: ``30 / 44 * 44``)."""
    exact = head_dim * rotary.fraction
    dim = round(exact) if abs(exact - round(exact)) < 1e-6 else int(exact)
    if dim <= 0 or dim % 2:
        raise CheckpointError(
            f"{source}: a partial rotary fraction of {rotary.fraction} of head_dim={head_dim} gives {dim} "
            "rotated dimensions; it must be a positive even number"
        )
    return dim


def scaled_context(hf: HFConfig, scaling: RotaryScaling | None) -> int:
    """The context a checkpoint accepts. Configs with linear, llama3 or longrope scaling give the stretched
    length as ``max_position_embeddings``; dynamic scaling exists to run past it (``factor`` times), and yarn
    configs whose ``original_max_position_embeddings`` equals it stretch it by ``factor`` (Qwen2.5's recipe)."""
    n_ctx = hf.require("max_position_embeddings")
    if scaling is None or scaling.factor is None or scaling.kind not in ("dynamic", "yarn"):
        return n_ctx
    if scaling.kind == "yarn" and n_ctx > (scaling.original_n_ctx or n_ctx):
        return n_ctx
    return int(n_ctx * scaling.factor)
