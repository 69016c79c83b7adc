"""The recall task: a symbol, ``d`` distractors, a query token; the answer is the first symbol."""

from __future__ import annotations

import torch

from studies.recurrence.config import RecurrenceConfig


def make_batch(
    cfg: RecurrenceConfig, d: int, batch: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences ``[batch, d + 2]``: a symbol, d distractors, the query token; targets ``[batch]``."""
    target = torch.randint(0, cfg.n_symbols, (batch,), generator=gen)
    distractors = torch.randint(cfg.n_symbols, cfg.n_symbols + cfg.n_distractors, (batch, d), generator=gen)
    query = torch.full((batch, 1), cfg.d_vocab - 1)
    return torch.cat([target[:, None], distractors, query], dim=1), target
