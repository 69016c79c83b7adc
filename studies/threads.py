"""Tiny models on one thread.

The studies' models are small: the random ones have d_model 32 to 64 and a few dozen tokens, and even
SmolLM2 sees a few short sentences at a time. An intra-op thread pool cuts each of their operations into pieces
too small to pay for the synchronisation, and on a shared machine a thread that waits for a descheduled
partner spins and burns CPU time. On 2 CPU cores shared with another job, the residual study's random stacks
took 0.7 s of CPU time on one thread and 8 to 27 s on two; the position study's 40 SmolLM2 forwards took 4 s
on one thread and 14 to 65 s on two. So the studies run their measurements on one thread.
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
