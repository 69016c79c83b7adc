"""circuit-tracer's default backend, TransformerLens, builds the same attribution graph as interp.

The golden tests compare interp with circuit-tracer's nnsight backend. Its TransformerLens backend reads no
checkpoint folder (it knows models by hub name), so ``benchmarks/attribution.py`` builds it offline from a
``HookedTransformerConfig`` written from the checkpoint's config and the weights TransformerLens's own Llama
converter gives; the benchmark raises if that backend's adjacency differs from interp's by more than
``1e-4 max|A|`` (the golden tests' tolerance). Run live on the benchmark's tiny model, in circuit-tracer's own
environment (``tests/reference_envs.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.reference_envs import require

ROOT = Path(__file__).resolve().parents[2]


def test_the_transformerlens_backend_builds_interp_s_graph(tmp_path):
    python = require("circuit-tracer")
    out = tmp_path / "run.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "attribution.py"), "--ct-python", python,
               "--size", "tiny", "--d-transcoder", "512", "--prompt-lengths", "8", "--max-feature-nodes", "0,20",
               "--backends", "transformerlens", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = json.loads(out.read_text())["runs"]
    assert run["figures"]["circuit_tracer_backends"] == ["transformerlens"]
    for row in run["figures"]["rows"]:
        theirs = row["transformerlens"]
        assert theirs["n_nodes"] == row["interp"]["n_nodes"]
        assert theirs["graph_difference"] is not None and theirs["graph_difference"] <= 1e-4
