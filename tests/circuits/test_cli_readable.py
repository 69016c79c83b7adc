"""``interp attribute --explain-attention N --supernodes auto --subgraph FILE``: the files hold what the library
computes for the same graph, and a bad subgraph file is refused in one line before the model loads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import interp
from interp.circuits import AttributionGraph, attribute
from interp.circuits.features.attention import attention_edges, explain_edges
from interp.circuits.features.subgraph import neuronpedia_ids
from interp.cli import main
from interp.sae import load_transcoders
from tests.circuits.test_cli_attribute import LLAMA, tc_folder  # noqa: F401  (the fixture)

PROMPT = "w17 w33 w5 w48 w9 w33"


def _run(tmp_path, tc_folder, *extra) -> Path:  # noqa: F811
    out = tmp_path / "graph"
    argv = ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT, "--out", str(out),
            "--max-logits", "2", "--quiet", *extra]  # fmt: skip
    assert main(argv) == 0
    return out


def test_explained_edges_and_a_subgraph_from_a_file(tmp_path, tc_folder):  # noqa: F811
    model = interp.load(str(LLAMA))
    tc = load_transcoders(tc_folder, model=model)
    graph = attribute(model, tc, PROMPT, max_logits=2, progress=False)
    features = [str(n) for n in graph.nodes if n.kind == "feature"]
    ids = neuronpedia_ids(graph, model.cfg.d_vocab)
    wanted = tmp_path / "sub.json"
    wanted.write_text(json.dumps({"pinnedIds": [ids["token@2"]], "supernodes": [["mine", features[-1]]]}))
    out = _run(tmp_path, tc_folder, "--explain-attention", "2", "--subgraph", str(wanted))
    doc = json.loads((out / "graph.json").read_text())
    expected = explain_edges(model, tc, graph, attention_edges(graph, 2), top_heads=3)
    saved = doc["interp"]["attention"]
    assert [(r["target"], r["source"]) for r in saved] == [(e.target, e.source) for e in expected]
    for record, found in zip(saved, expected, strict=True):
        assert [h["score"] for h in record["heads"]] == pytest.approx(
            [h.score for h in found.heads], rel=1e-6
        )
    assert doc["interp"]["subgraph"] == {
        "pinned": ["token@2", features[-1]],
        "supernodes": [["mine", features[-1]]],
    }
    assert doc["qParams"]["supernodes"] == [["mine", ids[features[-1]]]]
    back = AttributionGraph.load(out)
    assert back.selection.supernodes == (("mine", (features[-1],)),)
    # the saved graph.json is itself a subgraph file: a second run reads it back to the same subgraph
    again = _run(tmp_path / "again", tc_folder, "--subgraph", str(out / "graph.json"))
    assert AttributionGraph.load(again).selection == back.selection


def test_proposed_supernodes_are_saved_with_their_report(tmp_path, tc_folder):  # noqa: F811
    out = _run(tmp_path, tc_folder, "--supernodes", "auto")
    doc = json.loads((out / "graph.json").read_text())
    report = doc["interp"]["supernode_criterion"]
    assert report["influence_kept"] >= 1 - report["tolerance"]
    assert report["n_groups"] == len(doc["qParams"]["supernodes"])
    assert report["n_units"] == report["n_nodes"] - sum(len(s) - 2 for s in doc["qParams"]["supernodes"])
    drawn = {n["node_id"] for n in doc["nodes"]}
    assert all(set(s[1:]) <= drawn for s in doc["qParams"]["supernodes"])  # groups of nodes the file draws
    # every group was proposed, and each awaits a reader's decision in the viewer
    assert report["proposed"] == [s[0] for s in doc["qParams"]["supernodes"]]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "is not a file"),
        ("{", "is not JSON"),
        ("[1]", "holds a list; expected an object with pinnedIds"),
        ("{}", "has neither pinnedIds nor supernodes"),
    ],
)
def test_a_bad_subgraph_file_is_one_line(tmp_path, tc_folder, capsys, content, message):  # noqa: F811
    path = tmp_path / "sub.json"
    if content is not None:
        path.write_text(content)
    argv = ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT,
            "--out", str(tmp_path / "g"), "--subgraph", str(path), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "g").exists()


def test_explaining_and_proposing_say_what_they_do_and_count_it(tmp_path, tc_folder, capsys, monkeypatch):  # noqa: F811
    """The steps after the progress bar are not silent, and the last line counts the edges explained and the
    supernodes proposed (zero too, with the reason)."""
    out = tmp_path / "graph"
    argv = ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT, "--out", str(out),
            "--max-logits", "2", "--explain-attention", "2", "--supernodes", "auto"]  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr()
    doc = json.loads((out / "graph.json").read_text())
    n_features = sum(1 for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder")
    proposed = len(doc["interp"]["supernode_criterion"]["proposed"])
    steps = [line for line in said.err.splitlines() if line.startswith("interp attribute: ")]
    assert steps[0] == "interp attribute: explaining the 2 strongest attention edges between positions ..."
    assert re.fullmatch(
        r"interp attribute: explaining the 2 strongest attention edges between positions: 2 explained in "
        r"\d+\.\d s",
        steps[1],
    )
    nodes = f"{n_features} feature node{'s' * (n_features != 1)}"
    assert steps[2] == f"interp attribute: proposing supernodes among {nodes} ..."
    assert re.fullmatch(
        rf"interp attribute: proposing supernodes among {nodes}: {proposed} proposed in "
        r"\d+\.\d s",
        steps[3],
    )
    last = said.out.strip().splitlines()[-1]
    assert f"; 2 of 2 attention edges explained; {proposed} supernodes proposed" in last
    assert len(doc["interp"]["attention"]) == 2

    # none proposed (thresholds no pair meets): said, with the reason
    from interp.circuits.features import supernodes

    propose = supernodes.propose_supernodes
    monkeypatch.setattr(
        supernodes,
        "propose_supernodes",
        lambda *a, **k: propose(*a, **{**k, "decoder_cosine": 1.0, "effect_cosine": 1.0}),
    )
    assert main([*argv[:-4], "--supernodes", "auto", "--quiet"]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(
            "0 supernodes proposed (no two feature nodes at one position have decoder cosine >= 1.0 and effect "
            f"cosine >= 1.0); wrote {out / 'graph.safetensors'}, graph.json, graph-metadata.json and index.html"
        )
    )
