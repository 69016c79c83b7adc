"""glibc's heap and the resident set: large allocations mapped on their own, so that freeing them frees memory.

glibc serves an allocation below its mmap threshold from its heap, and keeps the heap's pages when it is freed,
for reuse. The threshold starts at 128 KiB and rises (up to 32 MiB) each time a larger block that had its own
mapping is freed, so a loop whose tensors are a few MiB each soon serves them all from the heap. The resident
set then holds, beyond what is live, the freed buffers of the largest step so far and the holes of a fragmented
heap, in amounts set by what ran before rather than by what is live (measured for attribution and for the
dashboard pass in ``benchmarks/README.md``). :func:`map_large_allocations` fixes the threshold: every
allocation of that size or more gets its own mapping and leaves the resident set when freed, so the resident
set follows what is live; smaller ones stay in the heap, where reuse is cheap. glibc has no way back to the
rising threshold, so the setting holds for the rest of the process (the last one asked for). Elsewhere than
glibc nothing changes.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 2**20
"""Attribution's threshold: its large tensors are gradients of MiB and more."""
START_THRESHOLD = 2**17
"""glibc's own threshold before it rises: kept where many buffers of a few hundred KiB come and go."""


def map_large_allocations(threshold: int = MMAP_THRESHOLD) -> Callable[[int], int] | None:
    """Ask glibc to give every allocation of ``threshold`` bytes or more its own mapping (see the module
    docstring); glibc's ``malloc_trim`` (which hands the heap's free pages back), or ``None`` where the C
    library is not glibc and nothing was changed."""
    try:
        libc = ctypes.CDLL(None)
        mallopt, trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return None
    mallopt(M_MMAP_THRESHOLD, threshold)
    return trim
