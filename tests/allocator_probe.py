"""``python tests/allocator_probe.py``: which blocks glibc maps on their own, before, inside and after
:func:`interp.allocator.mapped_allocations`, printed as JSON.

Run in a fresh process, with the environment the test gives it. ``interp/allocator.py`` is loaded from its
file alone (it needs nothing but the standard library), so that importing torch leaves no large free block in
the heap that a probe could be served from. A probe asks ``malloc`` for a block, after ``malloc_trim(0)``, and
reads from ``mallinfo2`` (glibc 2.33 or later) whether the count of blocks with a mapping of their own rose.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
from pathlib import Path

MiB = 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
        )
        + ("keepcost",)
    ]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _Mallinfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def mapped(libc: ctypes.CDLL, size: int) -> bool:
    """Whether glibc gives a block of ``size`` bytes a mapping of its own (the block is freed again)."""
    libc.malloc_trim(0)
    before = libc.mallinfo2().hblks
    block = libc.malloc(size)
    own = libc.mallinfo2().hblks > before
    libc.free(block)
    return own


def main() -> None:
    path = Path(__file__).resolve().parents[1] / "interp" / "allocator.py"
    spec = importlib.util.spec_from_file_location("allocator", path)
    allocator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(allocator)
    libc = _libc()
    seen = {}
    with allocator.mapped_allocations() as trim:
        seen["inside"] = [mapped(libc, 2 * MiB), mapped(libc, MiB // 2)]
        seen["trim"] = trim is not None
        with allocator.mapped_allocations(4 * MiB):
            seen["nested"] = [mapped(libc, 2 * MiB), mapped(libc, 6 * MiB)]
        seen["after nested"] = [mapped(libc, 2 * MiB), mapped(libc, MiB // 2)]
    seen["after"] = [mapped(libc, 2 * MiB), mapped(libc, 16 * MiB), mapped(libc, 48 * MiB)]
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
