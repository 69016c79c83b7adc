"""glibc's heap and the resident set: freed memory handed back, so that the resident set follows what is live.

glibc serves an allocation below its mmap threshold from its heap, and keeps the heap's pages when it is freed,
for reuse. The threshold starts at 128 KiB and rises (up to 32 MiB) each time a larger block that had its own
mapping is freed, so a loop whose tensors are a few MiB each soon serves them all from the heap. The resident
set then holds, beyond what is live, the freed buffers of the largest step so far and the holes of a fragmented
heap, in amounts set by what ran before rather than by what is live (measured for attribution and for the
dashboard pass in ``benchmarks/README.md``). Two remedies:

- :func:`heap_trim`: glibc's ``malloc_trim``, called between steps, hands every free page of the heap back.
  The next step faults in only the pages it uses, once; nothing else changes.
- :func:`map_large_allocations`: fixes the threshold, so that every allocation of that size or more gets its
  own mapping and leaves the resident set when freed, at once. Each such allocation then costs a mapping and
  its page faults (the dashboard pass measured a fifth more CPU time with 128 KiB), and glibc has no way back to
  the rising threshold: the setting holds for the rest of the process.

Elsewhere than glibc both do nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 2**20


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018 (both glibc's)
    except (OSError, AttributeError):
        return None
    return libc


def heap_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (``trim(0)`` hands the heap's free pages back), or ``None`` elsewhere."""
    libc = _libc()
    return None if libc is None else libc.malloc_trim


def map_large_allocations(threshold: int = MMAP_THRESHOLD) -> Callable[[int], int] | None:
    """Ask glibc to give every allocation of ``threshold`` bytes or more its own mapping (see the module
    docstring); :func:`heap_trim`'s function, or ``None`` where the C library is not glibc and nothing was
    changed."""
    libc = _libc()
    if libc is None:
        return None
    libc.mallopt(M_MMAP_THRESHOLD, threshold)
    return libc.malloc_trim
