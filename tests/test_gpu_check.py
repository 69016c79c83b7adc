"""scripts/gpu_check.sh, the one command that checks the GPU paths, names tests and scripts that exist and stops at
once, saying why, on a machine without a CUDA GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from tests.docs.pages import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_every_test_and_script_it_runs_exists():
    text = SCRIPT.read_text(encoding="utf-8")
    tests = re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", text)
    scripts = re.findall(r"((?:scripts|benchmarks)/\w+\.py)", text)
    assert len(tests) >= 5 and len(scripts) >= 5
    for path, name in tests:
        assert (ROOT / path).is_file(), path
        assert not name or f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), (path, name)
    for path in scripts:
        assert (ROOT / path).is_file(), path


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a CUDA GPU")
def test_without_a_gpu_it_stops_saying_why(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert (
        summary.strip() == "no CUDA GPU is visible to torch; this script checks the GPU paths and needs one"
    )
    assert "torch 2." in (tmp_path / "out" / "device.txt").read_text()
