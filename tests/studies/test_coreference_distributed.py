"""Two ranks equal one process: the coreference study under ``torchrun`` (gloo, CPU) writes the same numbers.

The model is a tiny random Llama saved as a Hugging Face folder, with a byte-level BPE trained on the texts
the study reads, so the run takes seconds. Each rank measures whole batches of the single-process plan and
patches whole twin pairs; rank 0 pools in item and pair order, so the reports must be byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from studies.data.load import load_items
from studies.data.texts import question_prompt, substitute
from tests.studies.tiny_lm import tiny_llama_folder
from tests.test_distributed import ranks_output

# Two ranks each: runs of several torchrun jobs at once would oversubscribe the cores, so the suite's workers
# (pytest-xdist, --dist loadgroup) run these in one worker, one job at a time.
pytestmark = pytest.mark.xdist_group("torchrun")

ARGS = ["--limit", "12", "--patch-pairs", "4", "--top-k", "2", "--batch-size", "4", "--quiet"]
TIMEOUT = 300  # seconds; a hang fails the test instead of blocking the suite


def corpus() -> list[str]:
    texts = []
    for item in load_items("winograd")[:40]:
        q = question_prompt(item)
        texts += [q.prefix + a for a in q.answers] + [substitute(item, c).text for c in (0, 1)]
    for item in load_items("agreement")[:40]:
        texts += [item.prompt + t for t in item.targets]
    return texts


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_llama_folder(tmp_path_factory.mktemp("tiny") / "model", corpus(), 1200)


def run(command: list[str], cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "INTERP_DEBUG": "1", "PYTHONFAULTHANDLER": "1"}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def study(*args: str) -> list[str]:
    return ["-m", "interp", "study", "coreference", *args]


def test_two_ranks_write_the_same_report_as_one(folder, tmp_path):
    args = ["--model", str(folder), *ARGS]
    one = run([sys.executable, *study(*args, "--out", str(tmp_path / "one"))], tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    two = run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         *study(*args, "--out", str(tmp_path / "two"))],
        tmp_path,
    )  # fmt: skip
    assert two.returncode == 0, ranks_output(two)
    a = json.loads((tmp_path / "one" / "results.json").read_text())
    b = json.loads((tmp_path / "two" / "results.json").read_text())
    for name in ("winograd", "agreement"):
        assert [r["id"] for r in a["results"][name]["items"]] == [
            r["id"] for r in b["results"][name]["items"]
        ]
        assert a["results"][name]["items"] == b["results"][name]["items"]  # per-item records
        assert a["results"][name]["pairs_used"] > 0  # patching ran, on both ranks
    assert a == b  # every aggregate table, to the last digit
    for table in a["tables"].values():
        assert (tmp_path / "one" / table["csv"]).read_bytes() == (
            tmp_path / "two" / table["csv"]
        ).read_bytes()


def test_a_failing_rank_ends_the_run(folder, tmp_path):
    args = ["--model", str(folder), *ARGS, "--data", str(tmp_path / "missing.jsonl")]
    two = run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         *study(*args, "--out", str(tmp_path / "two"))],
        tmp_path,
    )  # fmt: skip
    assert two.returncode != 0
    assert "missing.jsonl" in two.stderr
