"""The heads study's settings and the scores it computes."""

from __future__ import annotations

from dataclasses import dataclass

SCORES = ("previous_token", "duplicate_token", "induction", "first_token", "positional", "coreference")


@dataclass(frozen=True)
class HeadsConfig:
    """Probe sizes."""

    seq_len: int = 20
    batch: int = 8
    top_k: int = 5
    n_boot: int = 1000
    token_low: int = 1000
    token_high: int = 20000
    models: tuple[str, ...] = ("smollm2-135m", "minilm-l6")
