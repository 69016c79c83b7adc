"""The recurrence study's settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecurrenceConfig:
    """Task, model and budget sizes; both models get the same steps, batch and learning rate."""

    distances: tuple[int, ...] = (4, 16, 64, 256)
    n_symbols: int = 8
    n_distractors: int = 8
    d_model: int = 32
    d_hidden: int = 64
    steps: int = 200
    batch: int = 32
    lr: float = 3e-3
    n_eval: int = 512
    grad_batch: int = 16
    timing_lengths: tuple[int, ...] = (16, 64, 256, 1024)
    timing_repeats: int = 3

    @property
    def d_vocab(self) -> int:
        """Symbols, distractors and the query token."""
        return self.n_symbols + self.n_distractors + 1
