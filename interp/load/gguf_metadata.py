"""What a GGUF file's metadata says about its model: settings by key, rotary scaling, sliding layers.

Keys are read under the file's architecture (``gemma2.attention.sliding_window``), and :class:`Metadata`
remembers which were read, so that a key nothing understood can be refused instead of dropped. Rotary scaling
comes back as the ``rope_scaling`` of a ``config.json``, from the metadata llama.cpp writes (``rope.scaling.type``
linear or yarn, with their parameters) or from its tensors: ``rope_freqs`` (per-frequency divisors, how Llama
3.1's scaling is stored) and ``rope_factors_long``/``_short`` (Phi-3's longrope).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from interp.load.errors import CheckpointError
from interp.load.gguf_file import GGUFFile

_MISSING = object()
_ROPE_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
# Keys llama.cpp writes that say nothing about the computation.
_HARMLESS = ("rope.scaling.finetuned", "tensor_data_layout")


def decimal(value: float) -> float:
    """The shortest decimal that a float32 from the file rounds to (``1e-06``, not ``9.99999997e-07``): the
    number the converter was given, and the same float32. A value a float32 cannot hold is kept as it is.

    >>> decimal(float(np.float32(1e-6))), decimal(0.1)
    (1e-06, 0.1)
    """
    single = np.float32(value)
    return float(str(single)) if float(single) == value else float(value)


class Metadata:
    """A GGUF file's metadata under its architecture's prefix, remembering which keys were read.

    Args:
        file: the file.
        arch: ``general.architecture``; keys are given without it (``"attention.head_count"``).
    """

    def __init__(self, file: GGUFFile, arch: str) -> None:
        self.file, self.arch = file, arch
        self._read: set[str] = set()

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The value of ``{arch}.{key}``; raises naming the key if it is absent and there is no default."""
        full = f"{self.arch}.{key}"
        self._read.add(full)
        if default is _MISSING:
            return self.file.get(full)
        return self.file.get(full, default)

    def integer(self, key: str, default: Any = _MISSING) -> Any:
        """An integer setting; a per-layer list (which these families do not have) raises."""
        value = self.get(key, default)
        if isinstance(value, list):
            raise CheckpointError(
                f"{self.file.path}: {self.arch}.{key} differs per layer ({value[:6]}...); per-layer values "
                "are not supported for this architecture"
            )
        return value if value is None or value is default else int(value)

    def number(self, key: str, default: Any = _MISSING) -> Any:
        """A float setting, as the decimal the float32 in the file was written from (``1e-06``, not
        ``9.99999997e-07``)."""
        value = self.get(key, default)
        return value if value is None or value is default else decimal(value)

    def refuse(self, key: str, value: Any, why: str) -> CheckpointError:
        """The error for a setting this loader does not implement."""
        return CheckpointError(f"{self.file.path}: {self.arch}.{key}={value!r} is not supported ({why})")

    def unread(self) -> list[str]:
        """Keys under the architecture's prefix that nothing has read."""
        prefix = f"{self.arch}."
        harmless = {prefix + key for key in _HARMLESS}
        return sorted(k for k in self.file.keys() if k.startswith(prefix) and k not in self._read | harmless)


def rope_scaling(meta: Metadata, raw: dict[str, torch.Tensor]) -> dict[str, Any] | None:
    """The ``rope_scaling`` of ``config.json`` from the file's metadata and rotary tensors (taken out of
    ``raw``); ``None`` for plain rotary. Kinds llama.cpp writes that ``transformers`` would compute otherwise
    raise, naming the key."""
    freqs, long, short = (raw.pop(name, None) for name in _ROPE_TENSORS)
    kind = meta.get("rope.scaling.type", None)
    factor = meta.number("rope.scaling.factor", None)
    if factor is None:
        factor = meta.number("rope.scale_linear", None)  # the older key
    original = meta.integer("rope.scaling.original_context_length", None)
    if kind is None:  # llama.cpp's default type is linear, a no-op without a factor
        kind = "linear" if factor not in (None, 0.0, 1.0) else "none"
    if long is not None or short is not None:
        if long is None or short is None or kind not in ("none", "longrope") or original is None:
            raise meta.refuse(
                "rope.scaling.type",
                kind,
                "longrope needs both rope_factors_long and rope_factors_short "
                "tensors and rope.scaling.original_context_length, and no other scaling",
            )
        return {
            "rope_type": "longrope",
            "long_factor": [decimal(v) for v in long.flatten().tolist()],
            "short_factor": [decimal(v) for v in short.flatten().tolist()],
            "original_max_position_embeddings": original,
            "attention_factor": _longrope_attention(meta, original),
        }
    if freqs is not None:
        if kind != "none":
            raise meta.refuse("rope.scaling.type", kind, "together with a rope_freqs tensor")
        return {"rope_type": "factors", "factors": [decimal(v) for v in freqs.flatten().tolist()]}
    if kind == "none":
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}
    if kind == "yarn":
        for key, neutral in (
            ("rope.scaling.yarn_ext_factor", 1.0),
            ("rope.scaling.yarn_log_multiplier", 0.0),
        ):
            value = meta.number(key, None)
            if value not in (None, neutral):
                raise meta.refuse(key, value, "transformers' yarn has no such parameter")
        if factor is None or original is None:
            raise meta.refuse(
                "rope.scaling.type", kind, "yarn needs rope.scaling.factor and original_context_length"
            )
        return {
            "rope_type": "yarn",
            "factor": factor,
            "original_max_position_embeddings": original,
            "beta_fast": meta.number("rope.scaling.yarn_beta_fast", None),
            "beta_slow": meta.number("rope.scaling.yarn_beta_slow", None),
            "attention_factor": meta.number("rope.scaling.yarn_attn_factor", None),
        }
    raise meta.refuse(
        "rope.scaling.type", kind, "supported: 'none', 'linear', 'yarn', longrope factor tensors, rope_freqs"
    )


def sliding_layers(meta: Metadata, n_layers: int, period: int) -> list[str]:
    """``layer_types`` as llama.cpp reads them: ``attention.sliding_window_pattern`` (a flag per layer, or a
    period), else ``period``; with period ``n`` every ``n``-th layer is global, the others slide."""
    pattern = meta.get("attention.sliding_window_pattern", period)
    if isinstance(pattern, list):
        if len(pattern) != n_layers:
            raise meta.refuse("attention.sliding_window_pattern", pattern, f"it needs {n_layers} flags")
        sliding = [bool(p) for p in pattern]
    else:
        n = int(pattern)
        sliding = [n == 0 or i % n < n - 1 for i in range(n_layers)]
    return ["sliding_attention" if s else "full_attention" for s in sliding]


def _longrope_attention(meta: Metadata, original: int) -> float | None:
    """The attention factor the file gives, or ``None`` where it is the one ``transformers`` derives from the
    stretch (``sqrt(1 + ln s / ln original)``, which Phi-3's converter writes), so that the config says so."""
    stored = meta.number("rope.scaling.attn_factor", None)
    stretch = meta.integer("context_length") / original
    derived = math.sqrt(1 + math.log(stretch) / math.log(original)) if stretch > 1 else 1.0
    return None if stored is None or abs(stored - derived) <= 1e-6 * derived else stored
