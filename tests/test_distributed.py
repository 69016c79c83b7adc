"""Sharding and merging, in one process and across two ``torchrun`` ranks on this machine (gloo).

The torchrun tests start real process groups: the study-shaped job (shard, gather, merge) must give what one
process gives; a rank that raises must end the whole run with its own error, promptly; and ``interp cache``
over two ranks must read back row for row like a single-process store.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch

from interp import distributed
from interp.load import load
from interp.store import ActivationStore, StoreMismatchError, cache_activations
from tests.distributed_job import records_for
from tests.store.models import sentences, write_gpt2_folder

# Two ranks each: runs of several torchrun jobs at once would oversubscribe the cores, so the suite's workers
# (pytest-xdist, --dist loadgroup) run these in one worker, one job at a time.
pytestmark = pytest.mark.xdist_group("torchrun")

ROOT = Path(__file__).resolve().parents[1]


def torchrun(*args: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess, float]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR")
    }
    # faulthandler: a rank killed by a signal (a crash in native code) prints every thread's Python stack
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.time()


def ranks_output(done: subprocess.CompletedProcess) -> str:
    """What the ranks printed, for a failed run's message: stdout and stderr up to torchrun's own report of the
    failure (which names only the signal), the end of it when long, then the report's root cause."""
    err = done.stderr
    cut = err.find("torch/distributed/elastic/multiprocessing/api.py")
    ranks = err if cut < 0 else err[: err.rfind("\n", 0, cut) + 1]
    cause = err[err.find("Root Cause") :] if "Root Cause" in err else ""
    return (done.stdout[-2000:] + ranks[-8000:] + cause)[-12000:]


# Single process: every helper is a no-op or the identity.


def test_shard_ranges_are_contiguous_disjoint_and_cover_everything():
    for n in (0, 1, 5, 23, 100):
        for world in (1, 2, 3, 8):
            spans = [distributed.shard_range(n, r, world) for r in range(world)]
            assert [i for s in spans for i in s] == list(range(n))
            assert max(len(s) for s in spans) - min(len(s) for s in spans) <= 1
    assert distributed.shard(list("abcde")) == list("abcde")  # one process owns all
    with pytest.raises(ValueError, match="outside a world of 2"):
        distributed.shard_range(10, 2, 2)


def test_docstring_examples():
    result = doctest.testmod(distributed)
    assert result.attempted > 0 and result.failed == 0


def test_single_process_collectives():
    assert not distributed.is_distributed() and distributed.rank() == 0 and distributed.world_size() == 1
    assert distributed.gather_objects({"a": 1}) == [{"a": 1}]
    assert distributed.all_gather_objects(3) == [3]
    assert distributed.broadcast_object("x") == "x"
    with distributed.session() as active:
        assert active is False
    with pytest.raises(ZeroDivisionError), distributed.fail_fast():
        1 / 0  # noqa: B018 - a single process re-raises unchanged


@dataclass
class Record:
    item: int
    value: float


def test_merges_are_exact():
    assert distributed.merge_counts([Counter(a=2, b=1), {"a": 3}]) == Counter(a=5, b=1)
    sums = distributed.merge_sums(
        [{"h": torch.tensor([1, 2]), "n": 3}, {"h": torch.tensor([10, 20]), "m": 1}]
    )
    assert torch.equal(sums["h"], torch.tensor([11, 22])) and sums["n"] == 3 and sums["m"] == 1
    parts = [[{"item": 3}, {"item": 0}], [{"item": 2}], []]
    assert [r["item"] for r in distributed.merge_records(parts)] == [0, 2, 3]
    assert [r.item for r in distributed.merge_records([[Record(1, 0.5)], [Record(0, 1.0)]])] == [0, 1]
    with pytest.raises(ValueError, match="item=2"):
        distributed.merge_records([[{"item": 2}], [{"item": 2}]])
    a = pd.DataFrame({"layer": [0, 1], "head": [0, 0], "count": [1, 2]})
    b = pd.DataFrame({"layer": [1, 0], "head": [0, 1], "count": [5, 7]})
    table = distributed.merge_tables([a, b], by=["layer", "head"])
    assert table.to_dict("list") == {"layer": [0, 0, 1], "head": [0, 1, 0], "count": [1, 7, 7]}


# Two ranks under torchrun.


@pytest.fixture(scope="module")
def failing_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("job") / "merged.json"
    done, ended = torchrun("-m", "tests.distributed_job", str(out), "--fail")
    return out, done, ended


def test_two_ranks_merge_to_the_single_process_result(failing_job):
    out, done, _ = failing_job
    merged = json.loads(out.read_text())
    records, counts = records_for(range(23))
    assert merged["world_size"] == 2
    assert merged["records"] == records  # per-item values, bit for bit, in item order
    assert merged["counts"] == dict(counts)


def test_a_failing_rank_stops_the_run_with_its_error(failing_job):
    _, done, ended = failing_job
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "interp: rank 1 of 2 failed: ValueError: rank one cannot go on" in output
    # torchrun names the first failure it observed as the root cause; when the stopped rank 0 is seen
    # first that is rank 0, so only the failing rank's own message above is asserted.
    assert "Root Cause" in output
    raised_at = float(re.search(r"raising at ([0-9.]+)", output).group(1))
    assert ended - raised_at < 30  # the waiting rank is stopped, not left to a collective timeout


def test_interp_cache_over_two_ranks_reads_like_one_process(tmp_path):
    checkpoint = write_gpt2_folder(tmp_path / "tiny-gpt2")
    texts = sentences(17, seed=7)
    data = tmp_path / "data.txt"
    data.write_text("\n".join(texts))
    hooks = "blocks.0.hook_resid_post,blocks.1.attn.hook_z"
    out = tmp_path / "two"
    args = [
        "--data",
        str(data),
        "--hooks",
        hooks,
        "--out",
        str(out),
        "--batch-size",
        "3",
        "--shard-rows",
        "10",
    ]
    done, _ = torchrun("-m", "interp", "cache", str(checkpoint), *args, "--quiet")
    assert done.returncode == 0, ranks_output(done)
    assert done.stdout.count("rows x 2 hooks") == 1  # rank 0 alone prints the summary
    two = ActivationStore(out)
    assert two.complete and two.meta["identity"]["world_size"] == 2
    assert {p.parent.name for p in (s.path for s in two.shards)} == {"rank0", "rank1"}
    one = cache_activations(
        load(checkpoint),
        texts,
        hooks.split(","),
        tmp_path / "one",
        batch_size=3,
        shard_rows=10,
        progress=False,
    )
    assert two.index.drop(columns="shard").equals(one.index.drop(columns="shard"))
    for hook in hooks.split(","):
        assert torch.equal(two.tensor(hook), one.tensor(hook))
    with pytest.raises(StoreMismatchError, match="written by 2 rank"):
        cache_activations(load(checkpoint), texts, hooks.split(","), out, batch_size=3, progress=False)
