"""Benchmark results keep every run with what it ran on: versions, threads, machine and load."""

import json
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import provenance  # noqa: E402


def test_a_rerun_is_appended_with_its_environment(tmp_path):
    out = tmp_path / "results" / "x.json"
    for figure in (1.0, 2.0):
        provenance.write_run(out, {"ratio": figure}, provenance.environment(["transformers"]))
    runs = provenance.read_runs(out)
    assert [r["figures"]["ratio"] for r in runs] == [1.0, 2.0]  # the second run did not replace the first
    env = runs[1]["environment"]
    assert provenance.missing(runs[1]) == []
    assert (
        env["versions"]["torch"] == torch.__version__.split("+")[0]
        or env["versions"]["torch"] == torch.__version__
    )
    assert (
        env["versions"]["transformers"] is not None
        and env["threads"]["torch_intra_op"] == torch.get_num_threads()
    )
    assert len(env["load_start"]) == 3 and len(env["load_end"]) == 3


def test_a_file_in_the_older_layout_is_one_run_missing_every_field(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"runs": [1, 2], "torch": "2.13.0"}))  # overhead.py's own "runs" key
    (run,) = provenance.read_runs(old)
    assert run["figures"]["runs"] == [1, 2] and provenance.missing(run) == list(provenance.FIELDS)


@pytest.mark.parametrize("script", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_every_script_writes_its_json_through_write_run(script):
    """A script run from the command line takes ``--out`` and writes through ``provenance.write_run``; the others
    are parts of one (a worker in a peer's environment, the splicing half of ``sae.py``, provenance itself)."""
    text = script.read_text()
    if 'if __name__ == "__main__":' not in text:
        assert script.stem in PARTS, (
            f"{script.name} has no command line and is not a known part of another script"
        )
        return
    assert '"--out"' in text, f"{script.name} stores no run: it needs --out and provenance.write_run"
    assert "provenance.write_run(args.out" in text and not re.search(r"Path\(args\.out\)\.write_text", text)


PARTS = {"provenance": "the run's record itself", "dashboards_peer": "SAEDashboard's worker for dashboards.py",
         "sae_splice": "the splicing half of sae.py"}  # fmt: skip


@pytest.mark.parametrize(
    "path", sorted((ROOT / "benchmarks" / "results").glob("*.json")), ids=lambda p: p.name
)
def test_every_stored_run_says_what_it_lacks(path):
    data = json.loads(path.read_text())
    assert set(data) == {"runs"} and data["runs"]
    for run in data["runs"]:
        env = run["environment"]
        assert set(provenance.missing(run)) <= set(env.get("missing", []))
        if path.name.startswith("attribution"):
            assert set(_attribution_backends(run)) <= {"nnsight", "transformerlens"}


def _attribution_backends(run: dict) -> list[str]:
    """circuit-tracer's backends an attribution run compared: named in the run, and each row holds them."""
    figures = run["figures"]
    if figures.get("max_memory_gb"):  # interp alone under memory budgets: no backend, every row budgeted
        assert figures["circuit_tracer_backends"] == [] and all(row["budgets"] for row in figures["rows"])
        return []
    if figures.get("circuit_tracer_backends") == []:  # interp alone: its peak run to run, or explanations
        assert all(set(r) == {"interp"} for row in figures["rows"] for r in row["rounds"])
        return []
    if "circuit_tracer_backends" in figures:  # runs with both backends
        backends = figures["circuit_tracer_backends"]
        assert backends and all(set(backends) <= set(row) for row in figures["rows"])
        return backends
    backend = run.get("circuit_tracer_backend", figures.get("circuit_tracer_backend"))
    assert backend == "nnsight"  # every run before the TransformerLens backend was added
    return [backend]


def test_stored_runs_name_no_folder_of_the_machine_that_ran_them(tmp_path):
    out = tmp_path / "x.json"
    env = provenance.environment(others={sys.executable: ["torch"]})
    provenance.write_run(out, {"args": {"peer_python": sys.executable, "out": "results/x.json"}}, env)
    (run,) = provenance.read_runs(out)
    assert run["figures"]["args"] == {"peer_python": Path(sys.executable).parts[-3], "out": "results/x.json"}
    assert list(run["environment"]["versions_elsewhere"]) == [Path(sys.executable).parts[-3]]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "benchmarks" / "results").glob("*.json")), ids=lambda p: p.name
)
def test_no_stored_run_holds_an_absolute_path(path):
    def strings(value):
        if isinstance(value, dict):
            yield from (s for v in value.values() for s in strings(v))
            yield from value  # keys too
        elif isinstance(value, list):
            yield from (s for v in value for s in strings(v))
        elif isinstance(value, str):
            yield value

    assert [s for s in strings(json.loads(path.read_text())) if s.startswith("/")] == []
