"""Labels in graph files: only feature nodes with an explanation get one, a graph of another scan is left alone,
and every file is rewritten atomically (a write that fails leaves the file as it was). That a label reaches a
viewer page built before it is checked in a browser (``test_viewer_labels_browser.py``)."""

from __future__ import annotations

import json

import pytest

from interp.circuits.features import labels as labels_module
from interp.circuits.features.labels import add_labels
from interp.circuits.features.neuronpedia import EMBEDDING, ERROR, FEATURE

INDEX = 1234  # a feature's Cantor-paired index, as the feature files are named


def _graph_folder(tmp_path):
    nodes = [
        {"node_id": "0_5_1", "feature": INDEX, "layer": "0", "feature_type": FEATURE},
        {"node_id": "0_0_1", "feature": INDEX, "layer": "0", "feature_type": ERROR},
        {"node_id": "E_9_5", "feature": INDEX, "layer": "E", "feature_type": EMBEDDING},
        {"node_id": "1_9_1", "feature": 999, "layer": "1", "feature_type": FEATURE, "clerp": "kept"},
    ]
    (tmp_path / "graph.json").write_text(
        json.dumps({"metadata": {"scan": "tc/"}, "nodes": nodes, "links": []})
    )
    (tmp_path / "graph_data").mkdir()
    other = {"metadata": {"scan": "./features/other"}, "nodes": [dict(nodes[0])], "links": []}
    (tmp_path / "graph_data" / "g.json").write_text(json.dumps(other))
    (tmp_path / "features" / "other").mkdir(parents=True)
    (tmp_path / "graph-metadata.json").write_text(json.dumps({"graphs": []}))
    return other


def test_labels_go_into_the_graphs_feature_nodes(tmp_path):
    other = _graph_folder(tmp_path)
    results = add_labels(tmp_path, {INDEX: "numbers"}, "planted")
    assert [(r.path.name, r.labelled, r.skipped) for r in results] == [
        ("graph.json", 1, None),
        ("g.json", 0, "its metadata names scan './features/other', not 'planted'"),
    ]
    got = json.loads((tmp_path / "graph.json").read_text())["nodes"]
    assert [n.get("clerp") for n in got] == ["numbers", None, None, "kept"]
    assert json.loads((tmp_path / "graph_data" / "g.json").read_text()) == other
    before = (tmp_path / "graph.json").stat().st_mtime_ns
    assert (
        add_labels(tmp_path, {INDEX: "numbers"}, "planted")[0].labelled == 1
    )  # nothing changed: not rewritten
    assert (tmp_path / "graph.json").stat().st_mtime_ns == before


def test_a_write_that_fails_leaves_the_graph_file_as_it_was(tmp_path, monkeypatch):
    _graph_folder(tmp_path)
    text = (tmp_path / "graph.json").read_text()
    real = labels_module.write_atomic

    def failing(path, write, **kwargs):
        def half(tmp):
            tmp.write_text(text[: len(text) // 2])
            raise OSError("disk full")

        return real(path, half, **kwargs)

    monkeypatch.setattr(labels_module, "write_atomic", failing)
    with pytest.raises(OSError, match="disk full"):
        add_labels(tmp_path, {INDEX: "numbers"}, "planted")
    assert (tmp_path / "graph.json").read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "features",
        "graph-metadata.json",
        "graph.json",
        "graph_data",
    ]
