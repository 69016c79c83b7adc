"""Memory handed back to the system: one policy, scoped to the work that needs it, and the C library loaded once.

glibc serves an allocation below its mmap threshold from its heap, and keeps the heap's pages when it is freed,
for reuse. The threshold starts at 128 KiB and rises (up to 32 MiB on 64-bit) each time a larger block that
had its own mapping is freed, so a loop whose tensors are a few MiB each soon serves them all from the heap. The
resident set then holds, beyond what is live, the freed buffers of the largest step so far and the holes of a
fragmented heap, in amounts set by what ran before rather than by what is live (measured for attribution and
for the dashboard pass in ``benchmarks/README.md``). The policy:

- **Every loop whose steps free large buffers trims the heap after each step** (:func:`heap_trim`: glibc's
  ``malloc_trim(0)`` hands every free page of the heap back; the next step faults in only the pages it uses,
  once; nothing else changes). The dashboard pass does, after each batch; attribution under a budget, after
  each backward pass.
- **Work that must stay under a memory budget maps its large allocations on their own, for as long as it runs**
  (:func:`mapped_allocations`, around attribution with ``max_memory_gb``): each block of the threshold or more
  gets its own mapping and leaves the resident set when freed, at once, so the peak follows what is live. Each
  such allocation costs a mapping and its page faults (the dashboard pass measured a fifth more CPU time with a
  128 KiB threshold), which is why the setting ends with the work. On leaving, the threshold is set back to
  what it was: the value an enclosing block set, or the one the environment fixed (``MALLOC_MMAP_THRESHOLD_``
  or ``GLIBC_TUNABLES``). Where glibc was adjusting it itself, there is no call that reads it or lets glibc
  adjust it again (any setting fixes it), so it is set to where glibc's own adjustment ends, 32 MiB with the
  trim threshold at twice that: the state of a process that has freed one block that large, in which the two
  behave alike.
- **Pages of a file mapping read once** are dropped with :func:`drop_file_pages` (``madvise(MADV_DONTNEED)``):
  clean pages of a file opened read-only, read again from it if touched (loading a checkpoint,
  :mod:`interp.load.assign`).

Elsewhere than glibc (and, for :func:`drop_file_pages`, than a C library with ``madvise``) each does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Callable, Iterator

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 2**20
"""The threshold :func:`mapped_allocations` sets unless told: 1 MiB."""
DEFAULT_THRESHOLD = 128 * 2**10
"""glibc's threshold before it adjusts it (``DEFAULT_MMAP_THRESHOLD_MIN``)."""
DYNAMIC_MAX = 4 * 2**20 * ctypes.sizeof(ctypes.c_long) if ctypes.sizeof(ctypes.c_long) == 8 else 512 * 2**10
"""Where glibc stops raising the threshold (``DEFAULT_MMAP_THRESHOLD_MAX``): 32 MiB on 64-bit."""
MADV_DONTNEED = 4

_fixed: list[int] = []
"""The thresholds set by the :func:`mapped_allocations` blocks under way, innermost last."""


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The process's C library, looked up once; ``None`` where there is none to call (Windows)."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except (OSError, TypeError):
        return None


def _function(name: str) -> Callable[..., int] | None:
    libc = _libc()
    return getattr(libc, name, None) if libc is not None else None


def heap_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (``trim(0)`` hands the heap's free pages back), or ``None`` elsewhere."""
    if _function("mallopt") is None:  # malloc_trim and mallopt are glibc's own
        return None
    return _function("malloc_trim")


@contextlib.contextmanager
def mapped_allocations(threshold: int = MMAP_THRESHOLD) -> Iterator[Callable[[int], int] | None]:
    """Within the block, every allocation of ``threshold`` bytes or more gets its own mapping; on leaving it the
    threshold is set back (see the module docstring).

    Yields:
        :func:`heap_trim`'s function, to call after each step, or ``None`` where the C library is not glibc
        and nothing was changed.
    """
    mallopt = _function("mallopt")
    if mallopt is None or heap_trim() is None:
        yield None
        return
    mallopt(M_MMAP_THRESHOLD, threshold)
    _fixed.append(threshold)
    try:
        yield heap_trim()
    finally:
        _fixed.pop()
        outer = _fixed[-1] if _fixed else environment_threshold()
        if outer is not None:
            mallopt(M_MMAP_THRESHOLD, outer)
        else:  # glibc was adjusting the threshold itself: where its adjustment ends
            mallopt(M_MMAP_THRESHOLD, DYNAMIC_MAX)
            mallopt(M_TRIM_THRESHOLD, 2 * DYNAMIC_MAX)


def environment_threshold() -> int | None:
    """The mmap threshold the environment fixed when the process started, or ``None`` when glibc adjusts it
    itself. Fixing any of glibc's heap settings (the trim threshold, the top pad, the most mappings) stops the
    adjustment at its start, 128 KiB."""
    tunables = dict(
        part.split("=", 1) for part in os.environ.get("GLIBC_TUNABLES", "").split(":") if "=" in part
    )
    for value in (os.environ.get("MALLOC_MMAP_THRESHOLD_"), tunables.get("glibc.malloc.mmap_threshold")):
        if value:
            with contextlib.suppress(ValueError):
                return int(value, 0)
    fixing = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
    tuned = ("glibc.malloc.trim_threshold", "glibc.malloc.top_pad", "glibc.malloc.mmap_max")
    if any(os.environ.get(name) for name in fixing) or any(tunables.get(name) for name in tuned):
        return DEFAULT_THRESHOLD
    return None


def drop_file_pages(start: int, length: int) -> None:
    """Drop the pages ``[start, start + length)`` (whole pages, inside a read-only mapping of a file) from the
    resident set; a hint, which a refusal only leaves resident."""
    madvise = _function("madvise")
    if madvise is None:
        return
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise(start, length, MADV_DONTNEED)
