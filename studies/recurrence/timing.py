"""Forward time against sequence length: an LSTM cell stepped over the sequence, the fused LSTM, attention."""

from __future__ import annotations

import time
from functools import partial

import numpy as np
import pandas as pd
import torch
from torch import nn

from interp import HookedTransformer, TransformerConfig
from studies.recurrence.config import RecurrenceConfig
from studies.threads import single_thread


def step_cells(cell: nn.LSTMCell, x: torch.Tensor) -> torch.Tensor:
    """Run an LSTM cell over ``x [batch, pos, d]`` one step at a time; each step needs the previous state."""
    h = c = torch.zeros(x.shape[0], cell.hidden_size)
    for t in range(x.shape[1]):
        h, c = cell(x[:, t], (h, c))
    return h


@torch.inference_mode()
@single_thread()
def timing(cfg: RecurrenceConfig, seed: int) -> pd.DataFrame:
    """Forward wall time (median of repeats, ms) against sequence length, batch 8, width ``d_hidden``.

    One thread, so that every method gets the same compute and a shared machine's other jobs do not
    decide the comparison through thread scheduling.
    """
    torch.manual_seed(seed)
    rows = []
    cell = nn.LSTMCell(cfg.d_hidden, cfg.d_hidden)
    fused = nn.LSTM(cfg.d_hidden, cfg.d_hidden, batch_first=True)
    for n in cfg.timing_lengths:
        x = torch.randn(8, n, cfg.d_hidden)
        tcfg = TransformerConfig(
            n_layers=1, d_model=cfg.d_hidden, n_heads=4, d_vocab=cfg.d_vocab, n_ctx=n, seed=seed
        )
        block_model = HookedTransformer(tcfg).eval()
        tokens = torch.randint(0, cfg.d_vocab, (8, n))

        for name, fn, steps in (
            ("LSTM cell loop", partial(step_cells, cell, x), n),
            ("fused LSTM", partial(fused, x), n),
            ("transformer, one pass", partial(block_model, tokens), 1),
        ):
            fn()  # warm-up
            times = []
            for _ in range(cfg.timing_repeats):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            rows.append(
                {
                    "method": name,
                    "seq_len": n,
                    "ms": 1000 * float(np.median(times)),
                    "sequential_steps": steps,
                }
            )
    return pd.DataFrame(rows)
