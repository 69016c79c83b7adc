"""circuit-tracer 0.5 serves an interp graph folder with its dashboards: its own local server on loopback,
answering the requests its page makes, each answer valid under its own pydantic models (run live in its
environment, ``tests/reference_envs.py``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from interp.circuits import attribute
from interp.sae.dashboards import Settings, write_dashboards
from tests.reference_envs import require
from tests.sae.dashboards import helpers

CHECK = Path(__file__).with_name("serve_check.py")


@pytest.fixture(scope="module")
def graph_folder(tmp_path_factory):
    model = helpers.model()
    tc = helpers.dictionary("per-layer", model)
    out = tmp_path_factory.mktemp("graph")
    write_dashboards(model, tc, out, helpers.texts(), scan="tiny-tc", settings=Settings(sample=12))
    graph = attribute(model, tc, "w17 w33 w5 w48", max_logits=3, progress=False)
    graph.save(out, model=model, transcoders=tc, dashboards=out)
    other = out / "second"
    graph.save(other, model=model, transcoders=tc, dashboards=out, slug="second-graph")
    return out, graph


def test_circuit_tracer_serves_the_graph_and_every_feature_node(graph_folder, tmp_path):
    out, graph = graph_folder
    python = require("circuit-tracer")
    result = tmp_path / "checked.json"
    done = subprocess.run(
        [str(python), str(CHECK), str(out), str(result)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    checked = json.loads(result.read_text())
    doc = json.loads((out / "graph.json").read_text())
    feature_nodes = {n["feature"] for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder"}
    assert checked["graphs"] == [
        {
            "slug": "graph",
            "scan": "./data/features/tiny-tc",
            "feature_nodes": len([n for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder"]),
        }
    ]
    assert set(checked["features"]) == {str(f) for f in feature_nodes} and feature_nodes
    for index, seen in checked["features"].items():
        on_disk = (out / "features" / "tiny-tc" / f"{index}.json").read_bytes()
        assert seen["bytes"] == len(on_disk)  # served as written
        record = json.loads(on_disk)
        assert str(record["layer"]) == seen["layer"]


def test_a_graph_elsewhere_links_the_dashboards(graph_folder):
    out, _ = graph_folder
    other = out / "second"
    link = other / "features" / "tiny-tc"
    assert link.is_symlink() and link.resolve() == (out / "features" / "tiny-tc").resolve()
    listed = json.loads((other / "graph-metadata.json").read_text())["graphs"]
    assert [g["slug"] for g in listed] == ["second-graph"] and (other / "second-graph.json").is_file()
    assert listed[0]["scan"] == "./data/features/tiny-tc"
