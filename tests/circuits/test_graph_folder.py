"""A graph folder is written as one set: an interruption between its files leaves the old graph whole, a kill
between renames is refused by every reader, only an earlier graph's files are replaced, and every file gets the
umask's mode."""

from __future__ import annotations

import importlib
import json
import os

import pytest
import torch

from interp import atomic
from interp.circuits import AttributionGraph, attribute
from interp.circuits.features import viewer
from interp.circuits.features.subgraph import subgraph_file
from interp.cli import main
from tests.circuits import test_cli_attribute
from tests.circuits.models import tiny
from tests.circuits.test_cli_attribute import LLAMA, PROMPT
from tests.circuits.transcoders import tiny_transcoders

tc_folder = test_cli_attribute.tc_folder  # the module's fixture, shared

SET = ("graph.safetensors", "graph.json", "index.html", "graph-metadata.json", "graph-manifest.json")


@pytest.fixture(scope="module")
def graphs():
    """A model, its transcoders, and two graphs of different prompts: the folder's old one and a new one."""
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg, seed=2)
    old = attribute(model, tc, torch.tensor([0, 3, 4, 5, 9]), max_logits=2, progress=False)
    new = attribute(model, tc, torch.tensor([0, 7, 8, 2, 6, 1]), max_logits=2, progress=False)
    return model, old, new


def _files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("where", ["after the tensors", "while the page is written"])
def test_ctrl_c_between_files_leaves_the_old_graph_whole(graphs, tmp_path, monkeypatch, where):
    model, old, new = graphs
    old.save(tmp_path, model=model)
    before = _files(tmp_path)
    assert set(before) == set(SET)
    if where == "after the tensors":
        graph_module = importlib.import_module("interp.circuits.features.graph")
        write = graph_module.save_file

        def tensors_then_interrupt(*args, **kwargs):
            write(*args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(graph_module, "save_file", tensors_then_interrupt)
    else:

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(viewer, "write_viewer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path, model=model)
    assert _files(tmp_path) == before  # every file old, no temporary left
    assert torch.equal(AttributionGraph.load(tmp_path).input_tokens, old.input_tokens)


@pytest.mark.parametrize("renamed", [1, 2])
def test_a_kill_between_renames_is_refused_by_the_readers(graphs, tmp_path, monkeypatch, renamed):
    """Only a killed process can stop the renames part way (Ctrl-C waits for the last one, see
    tests/test_atomic.py); the files it left new under the old record are refused, one line each."""
    model, old, new = graphs
    old.subgraph(pinned=["token@1"]).save(tmp_path, model=model)
    rename, done = os.replace, []

    def killed_after(src, dst):
        if len(done) == renamed:
            raise SystemExit("killed")
        done.append(dst)
        rename(src, dst)

    monkeypatch.setattr(atomic.os, "replace", killed_after)
    with pytest.raises(SystemExit):
        new.subgraph(pinned=["token@2"]).save(tmp_path, model=model)
    monkeypatch.undo()
    assert [os.path.basename(p) for p in done] == list(SET[:renamed])
    left = (
        "the folder was left part-written by a save that was killed between its files; save the graph there"
    )
    with pytest.raises(
        ValueError, match=rf"graph.safetensors is not the file .*graph-manifest.json lists: {left}"
    ):
        AttributionGraph.load(tmp_path)
    if renamed == 2:  # graph.json is the new one too: a subgraph read from it is refused as well
        with pytest.raises(ValueError, match=rf"graph.json is not the file .* lists: {left}"):
            subgraph_file(tmp_path / "graph.json")
    else:  # graph.json is still the old set's, whole
        assert subgraph_file(tmp_path / "graph.json").pinned == ("token@1",)
    new.save(tmp_path, model=model)  # saving again makes the folder whole
    assert torch.equal(AttributionGraph.load(tmp_path).input_tokens, new.input_tokens)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_every_file_of_the_folder_gets_the_umasks_mode(graphs, tmp_path, mask):
    model, old, _ = graphs
    before = os.umask(mask)
    try:
        old.save(tmp_path, model=model)
    finally:
        os.umask(before)
    assert {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()} == dict.fromkeys(SET, 0o666 & ~mask)


def test_only_an_earlier_graphs_files_are_replaced(graphs, tmp_path):
    model, old, new = graphs
    # files of someone else's with the names a save writes: refused by name, untouched, nothing written
    (tmp_path / "index.html").write_text("<p>my page</p>")
    (tmp_path / "notes.txt").write_text("kept")
    with pytest.raises(
        FileExistsError,
        match=r"holds index.html, which interp attribute did not write \(there is no graph-manifest.json\); "
        "they are left untouched",
    ):
        old.save(tmp_path, model=model)
    assert _files(tmp_path) == {"index.html": b"<p>my page</p>", "notes.txt": b"kept"}
    (tmp_path / "index.html").unlink()
    # a folder circuit-tracer wrote: its list is kept and extended, its own graph file is not replaced
    (tmp_path / "graph-metadata.json").write_text(json.dumps({"graphs": [{"slug": "theirs", "prompt": "x"}]}))
    (tmp_path / "theirs.json").write_text(
        json.dumps({"metadata": {"slug": "theirs"}, "nodes": [], "links": []})
    )
    old.save(tmp_path, model=model)
    listed = json.loads((tmp_path / "graph-metadata.json").read_text())["graphs"]
    assert [g["slug"] for g in listed] == ["theirs", "graph"]
    with pytest.raises(FileExistsError, match="holds theirs.json, which interp attribute did not write"):
        new.save(tmp_path, model=model, slug="theirs")
    # the folder's own files are replaced, and a second slug is added beside the first
    new.save(tmp_path, model=model)
    new.save(tmp_path, model=model, slug="second")
    record = json.loads((tmp_path / "graph-manifest.json").read_text())
    assert set(record["files"]) == {*SET[:4], "second.json"}
    assert record["files"]["second.json"] == record["generation"] != record["files"]["graph.json"]
    assert (tmp_path / "notes.txt").read_text() == "kept" and (tmp_path / "theirs.json").is_file()
    # a folder written before records existed is an earlier graph's too
    (tmp_path / "graph-manifest.json").unlink()
    old.save(tmp_path, model=model)
    # a list or record of that name that is not one is refused, untouched
    for name, text in (("graph-metadata.json", "[1, 2]"), ("graph-manifest.json", '{"files": 3}')):
        saved = (tmp_path / name).read_text()
        (tmp_path / name).write_text(text)
        with pytest.raises(
            ValueError, match=rf"{name} is not (a list of graphs|the record of a graph folder)"
        ):
            old.save(tmp_path, model=model)
        assert (tmp_path / name).read_text() == text
        (tmp_path / name).write_text(saved)


@pytest.mark.parametrize("name", ["index.html", "graph.json", "graph.safetensors"])
def test_the_command_refuses_before_the_model_loads(tmp_path, tc_folder, capsys, monkeypatch, name):
    monkeypatch.setattr(
        importlib.import_module("interp.load"), "load", lambda *a, **k: pytest.fail("the model loaded")
    )
    out = tmp_path / "mine"
    out.mkdir()
    (out / name).write_text("not a graph's")
    argv = ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT, "--out", str(out)]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"--out {out} holds {name}, which interp attribute did not write" in err
    assert _files(out) == {name: b"not a graph's"}
