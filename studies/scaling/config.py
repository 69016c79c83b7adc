"""The scaling study's settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScalingConfig:
    """Settings of the Monte Carlo and of the trained-model measurements."""

    d_ks: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
    n_queries: int = 1000
    n_keys: int = 32
    n_boot: int = 1000
    models: tuple[str, ...] = ("smollm2-135m", "minilm-l6")
