"""Tiny models on one thread.

The studies' random models are small (d_model 32 to 64, a few dozen tokens): an intra-op thread pool cuts each
of their operations into pieces too small to pay for the synchronisation, and on a shared machine a thread
that waits for a descheduled partner spins and burns CPU time. On 2 shared CPU cores the residual study's
random stacks took 0.7 s of CPU time on one thread and 8 to 27 s on two. Work on the trained models, whose
matrices are large enough to split, keeps the caller's thread count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def single_thread() -> Iterator[None]:
    """Run the enclosed block with one intra-op thread; the previous count is restored on exit."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
