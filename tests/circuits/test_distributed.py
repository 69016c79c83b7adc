"""Two torchrun ranks (gloo, CPU) give the single process's scores, evaluations and exact patches, to the bit."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.circuits.distributed_job import compute

# Two ranks each: runs of several torchrun jobs at once would oversubscribe the cores, so the suite's workers
# (pytest-xdist, --dist loadgroup) run these in one worker, one job at a time.
pytestmark = pytest.mark.xdist_group("torchrun")

ROOT = Path(__file__).resolve().parents[2]


def test_two_ranks_equal_one_process(tmp_path):
    env = {
        k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR")
    }
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = tmp_path / "two.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "tests.circuits.distributed_job", str(out)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    two, one = torch.load(out), compute()
    assert torch.equal(two["scores"], one["scores"]) and one["scores"].abs().max() > 0
    assert two["metrics"] == one["metrics"]
    assert two["evaluation"] == one["evaluation"]
    assert torch.equal(two["exact"], one["exact"])
