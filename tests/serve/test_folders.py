"""The named folders: what they hold, listed for a home page (graphs written by ``graph.save``, dashboard scans,
reports, explanations), and their files served as written, a graph's viewer and a linked dashboards folder
included."""

from __future__ import annotations

import json

import pytest

from interp.circuits import attribute
from interp.serve import Served, Sources, serving
from interp.serve.folders import Folders
from tests.circuits.test_golden import golden_case
from tests.serve.helpers import raw


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("work")
    model, tc, ref, _ = golden_case("llama-per-layer")
    graph = attribute(model, tc, ref["input_tokens"], max_logits=3, progress=False)
    graph.metadata["prompt"] = "w17 w33 w5"
    graph.save(root / "graphs" / "first", model=model, slug="cats")
    graph.save(root / "graphs" / "first", model=model, slug="dogs")
    scan = root / "dashboards" / "features" / "tc"
    scan.mkdir(parents=True)
    (scan / "run.json").write_text(json.dumps({"model": "tiny"}))
    (scan / "index.json").write_text(json.dumps({"features": []}))
    (scan / "12.json").write_text(json.dumps({"index": 12}))
    unfinished = root / "dashboards" / "features" / "half"
    unfinished.mkdir()
    (unfinished / "run.json").write_text(json.dumps({"model": "tiny"}))
    report = root / "graphs" / "reports" / "study"
    report.mkdir(parents=True)
    (report / "manifest.json").write_text(json.dumps({"study": "coreference"}))
    (report / "index.html").write_text("<p>report</p>")
    (root / "dashboards" / "explanations.jsonl").write_text("{}\n")
    (root / "graphs" / "first" / "features").mkdir()
    (root / "graphs" / "first" / "features" / "tc").symlink_to(
        scan
    )  # as graph.save(dashboards=...) links them
    folders = Folders([root / "graphs", root / "dashboards"])
    with serving(Served(model, "tiny", Sources([]), folders=folders)) as url:
        yield root, url


def test_the_catalogue_lists_what_each_folder_holds(tree):
    _, url = tree
    status, catalogue = raw(url, "GET", "/api/folders")
    assert status == 200
    graphs, dashboards = catalogue["folders"]
    assert graphs["name"] == "graphs" and dashboards["name"] == "dashboards"
    assert [(g["slug"], g["folder"], g["file"], g["prompt"]) for g in graphs["graphs"]] == [
        ("cats", "first", "cats.json", "w17 w33 w5"),
        ("dogs", "first", "dogs.json", "w17 w33 w5"),
    ]
    assert graphs["reports"] == [{"folder": "reports/study", "title": "coreference"}]
    assert graphs["scans"] == []  # the link to dashboards elsewhere is not walked; its own folder lists them
    assert dashboards["scans"] == [
        {"scan": "half", "folder": "features/half", "complete": False, "model": "tiny"},
        {"scan": "tc", "folder": "features/tc", "complete": True, "model": "tiny"},
    ]
    assert dashboards["explanations"] == [{"folder": ".", "file": "explanations.jsonl"}]


def test_files_are_served_as_written(tree):
    root, url = tree
    status, doc = raw(url, "GET", "/files/graphs/first/cats.json")
    assert status == 200 and doc == json.loads((root / "graphs" / "first" / "cats.json").read_text())
    status, page = raw(url, "GET", "/files/graphs/first/")
    assert status == 200 and page == (root / "graphs" / "first" / "index.html").read_text()
    status, feature = raw(
        url, "GET", "/files/graphs/first/features/tc/12.json"
    )  # through the link, into a named folder
    assert status == 200 and feature == {"index": 12}
    status, listing = raw(url, "GET", "/files/dashboards/features")
    assert status == 200 and listing == {"folder": "dashboards/features", "entries": ["half/", "tc/"]}
    assert raw(url, "POST", "/files/graphs/first/cats.json", b"{}")[0] == 405
