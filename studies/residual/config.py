"""The residual study's settings: the random stacks' sizes and the settings compared on them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResidualConfig:
    """Sizes of the random stacks and the sentences of the trained-model part."""

    depths: tuple[int, ...] = (6, 12, 24, 48, 96)
    seeds: int = 3
    d_model: int = 64
    n_heads: int = 4
    d_vocab: int = 64
    seq_len: int = 16
    batch: int = 4


SETTINGS = (
    # label, norm placement, norms kept, skip path kept
    ("pre-norm, residual", "pre", True, True),
    ("pre-norm, no residual", "pre", True, False),
    ("post-norm, residual", "post", True, True),
    ("post-norm, no residual", "post", True, False),
    ("no norm, residual", "pre", False, True),
    ("no norm, no residual", "pre", False, False),
)
