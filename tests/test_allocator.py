"""The one memory policy of ``interp/allocator.py``: large allocations mapped on their own inside
``mapped_allocations`` only, and the threshold set back when the block ends, checked in fresh processes."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interp import allocator

PROBE = Path(__file__).with_name("allocator_probe.py")
GLIBC_MALLINFO2 = hasattr(ctypes.CDLL(None), "mallinfo2")


def _probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run(
        [sys.executable, str(PROBE)], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(
    not GLIBC_MALLINFO2, reason="glibc's mallinfo2 (glibc 2.33 or later) counts mapped blocks"
)
@pytest.mark.parametrize(
    ("env", "after"),
    [
        # glibc adjusting the threshold itself: set back to where its adjustment ends, 32 MiB
        ({}, [False, False, True]),
        # the environment fixed 8 MiB: set back to 8 MiB
        ({"MALLOC_MMAP_THRESHOLD_": str(8 * 2**20)}, [False, True, True]),
        ({"GLIBC_TUNABLES": f"glibc.malloc.mmap_threshold={8 * 2**20}"}, [False, True, True]),
        # a fixed trim threshold stops glibc's adjustment at 128 KiB: set back to 128 KiB
        ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000000"}, [True, True, True]),
    ],
)
def test_large_blocks_are_mapped_inside_the_block_and_the_threshold_is_restored(env, after):
    seen = _probe(**env)
    assert seen["trim"]
    assert seen["inside"] == [True, False]  # 1 MiB: a 2 MiB block has its own mapping, 512 KiB not
    assert seen["nested"] == [False, True]  # an inner block's 4 MiB
    assert seen["after nested"] == [True, False]  # the outer block's 1 MiB again
    assert seen["after"] == after  # [2, 16, 48] MiB once the work has ended


def test_the_threshold_the_environment_fixed_is_read_as_glibc_reads_it(monkeypatch):
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert allocator.environment_threshold() is None
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0:glibc.malloc.mmap_threshold=0x100000")
    assert allocator.environment_threshold() == 2**20
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert allocator.environment_threshold() == 65536
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.top_pad=0")
    assert allocator.environment_threshold() == allocator.DEFAULT_THRESHOLD
