"""The position study's settings."""

from __future__ import annotations

from dataclasses import dataclass

POSITIONALS = ("none", "learned", "sinusoidal", "rotary")


@dataclass(frozen=True)
class PositionConfig:
    """Sizes of the random models and of the trained-model measurement."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_vocab: int = 100
    seq_len: int = 16
    n_sequences: int = 64
    probe_sequences: int = 256
    n_shuffles: int = 4
    n_boot: int = 1000
    models: tuple[str, ...] = ("smollm2-135m", "minilm-l6")
