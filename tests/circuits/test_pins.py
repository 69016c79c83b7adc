"""Pinned nodes: a ``--subgraph`` file is checked through before any work (its form before the model loads, its
nodes before attribution), pinned nodes survive pruning into ``graph.json`` and the page, and a cap on feature
nodes keeps the pinned features."""

from __future__ import annotations

import importlib
import json

import pytest

import interp
from interp.circuits import AttributionGraph, attribute
from interp.circuits.features.subgraph import neuronpedia_ids
from interp.cli import main
from interp.sae import load_transcoders
from tests.circuits import test_cli_attribute
from tests.circuits.test_cli_attribute import LLAMA, PROMPT

tc_folder = test_cli_attribute.tc_folder  # the module's fixture, shared

LOADER = importlib.import_module("interp.load")
FEATURES = importlib.import_module("interp.circuits.features")


def _argv(tmp_path, tc_folder, pins, *extra):
    path = tmp_path / "pins.json"
    path.write_text(pins if isinstance(pins, str) else json.dumps(pins))
    return ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT, "--out",
            str(tmp_path / "g"), "--subgraph", str(path), "--max-logits", "3", "--quiet", *extra]  # fmt: skip


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("pins", "message"),
    [
        (
            {"pinnedIds": None},
            'pinnedIds is null; it must be a list of nodes, each such as "3_417_5" (a Neuronpedia id) or '
            '"L3.F417@5" (interp\'s name)',
        ),
        ({"interp": {"subgraph": [1]}}, 'interp.subgraph is a list; it must be an object {"pinned": [...]'),
        ({"interp": 3}, "interp is a number; it must be an object (interp's extension)"),
        ({"qParams": []}, "qParams is a list; it must be an object with pinnedIds"),
        ({"qParams": {"pinnedIds": [1]}}, "qParams.pinnedIds[0] is 1; a node is named by a text such as"),
        (
            {"pinnedIds": ["L3.H2"]},
            "pinnedIds[0] is 'L3.H2', which names no node of a graph; name one such as",
        ),
        ({"pinnedIds": ["3-417-5"]}, "pinnedIds[0] is '3-417-5', which names no node of a graph"),
        ({"interp": {"subgraph": {"pinned": ["3_417_5"]}}}, "interp.subgraph.pinned[0] is '3_417_5', which"),
        ({"supernodes": "x"}, 'supernodes is "x"; it must be a list of [name, node, ...] lists'),
        (
            {"supernodes": [["a"]]},
            'supernodes[0] is ["a"]; a supernode is [name, node, ...] with at least one',
        ),
        (
            {"supernodes": [["", "E_0_0"]]},
            'supernodes[0][0] is ""; a supernode\'s name is a text that is not',
        ),
        ({"supernodes": [["a", "E_0_0"], ["a", "E_17_1"]]}, "supernodes[1]: two supernodes are named 'a'"),
        (
            {"supernodes": [["a", "E_0_0"], ["b", "E_0_0"]]},
            "supernodes[1][1]: E_0_0 is in supernodes 'a' and",
        ),
    ],
)
def test_a_bad_file_is_one_line_before_the_model_loads(
    tmp_path, tc_folder, capsys, monkeypatch, pins, message
):
    monkeypatch.setattr(LOADER, "load", lambda *a, **k: pytest.fail("the model loaded before the check"))
    assert main(_argv(tmp_path, tc_folder, pins)) == 2
    err = _one_line(capsys)
    assert f"--subgraph {tmp_path / 'pins.json'}: " in err and message in err
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize(
    ("pins", "message"),
    [
        # error L1@2 and layer 0's feature 1 at position 2 (active for this prompt) share this id
        (
            {"pinnedIds": ["0_1_2"]},
            "pinnedIds[0]: '0_1_2' is the Neuronpedia id of L0.F1@2 and L1.error@2; name the node as interp does",
        ),
        (
            {"pinnedIds": ["1_15_2"]},
            "pinnedIds[0]: '1_15_2' is the Neuronpedia id of no node of the graph: the "
            "graph will have no node 'L1.F15@2': feature 15 of layer 1 is not active at position 2",
        ),
        ({"pinnedIds": ["0_99_3"]}, "'L0.F99@3': layer 0 has 16 features"),
        (
            {"pinnedIds": ["E_999_1"]},
            "'E_999_1' is the Neuronpedia id of token 999 at position 1, but the prompt "
            "has token 17 there (id E_17_1)",
        ),
        ({"pinnedIds": ["E_0_9"]}, "'E_0_9' is a token at position 9, past the prompt's 5 tokens"),
        (
            {"pinnedIds": ["3_12345_4"]},
            "'3_12345_4' is the Neuronpedia id of a logit target 12345 at position "
            "4; the graph's targets are [6, 61, 18] at position 4",
        ),
        (
            {"supernodes": [["s", "E_17_1", "9_1_1"]]},
            "supernodes[0][2]: '9_1_1' names layer 9; the model has 2",
        ),
        (
            {"interp": {"subgraph": {"pinned": ["logit.3"]}}},
            "interp.subgraph.pinned[0]: the graph will have no "
            "node 'logit.3': there are 3 logit targets, logit.0 to logit.2",
        ),
        ({"interp": {"subgraph": {"pinned": ["L0.F2@0"]}}}, "nothing is attributed at position 0"),
        ({"interp": {"subgraph": {"pinned": ["L2.error@1"]}}}, "the model has 2 layers, 0 to 1"),
    ],
)
def test_a_node_the_graph_will_lack_is_refused_before_attribution(
    tmp_path,
    tc_folder,
    capsys,
    monkeypatch,
    pins,
    message,
):
    monkeypatch.setattr(
        FEATURES, "attribute", lambda *a, **k: pytest.fail("attribution ran before the check")
    )
    assert main(_argv(tmp_path, tc_folder, pins)) == 2
    err = _one_line(capsys)
    assert f"--subgraph {tmp_path / 'pins.json'}: " in err and message in err, err
    assert not (tmp_path / "g").exists()


@pytest.fixture(scope="module")
def graph(tc_folder):
    model = interp.load(str(LLAMA))
    tc = load_transcoders(tc_folder, model=model)
    return model, tc, attribute(model, tc, PROMPT, max_logits=3, progress=False)


def test_a_pinned_node_survives_pruning(graph, tmp_path):
    """Pinned, a feature that pruning drops is kept in graph.json (with the edges the edge threshold keeps of
    its) and in the page, so that every pinned id names a node the file draws."""
    model, _, g = graph
    mask = g.prune().node_mask
    dropped = [str(n) for i, n in enumerate(g.nodes) if n.kind == "feature" and not mask[i]]
    pinned = g.subgraph(pinned=[dropped[0]], supernodes={"pair": dropped[1:3]})
    kept = pinned.prune().node_mask
    assert all(kept[g.index(n)] for n in dropped[:3])
    assert (
        torch_equal(kept | pinned.pinned, kept) and int((kept & ~mask).sum()) == 3
    )  # only the pins are added
    pinned.save(tmp_path, model=model)
    doc = json.loads((tmp_path / "graph.json").read_text())
    drawn = {n["node_id"] for n in doc["nodes"]}
    ids = neuronpedia_ids(g, model.cfg.d_vocab)
    assert (
        doc["qParams"]["pinnedIds"] == [ids[n] for n in dropped[:3]]
        and set(doc["qParams"]["pinnedIds"]) <= drawn
    )
    assert all(link["source"] in drawn and link["target"] in drawn for link in doc["links"])
    page = (tmp_path / "index.html").read_text()
    data = json.loads(page.split('id="graph-data">', 1)[1].split("</script>", 1)[0])
    assert {n["uid"] for n in data["nodes"]} >= set(dropped[:3])
    assert AttributionGraph.load(tmp_path).selection == pinned.selection


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


def test_a_cap_on_feature_nodes_keeps_the_pinned_ones(graph, tmp_path, tc_folder, capsys):
    model, tc, g = graph
    influence = g.influence()[: g.n_features]
    weakest = str(g.nodes[int(influence.argmin())])
    capped = attribute(model, tc, PROMPT, max_logits=3, max_feature_nodes=3, progress=False)
    assert weakest not in {str(n) for n in capped.nodes}
    kept = attribute(model, tc, PROMPT, max_logits=3, max_feature_nodes=3, keep=[weakest], progress=False)
    assert kept.n_features == 3 and weakest in {str(n) for n in kept.nodes}
    assert kept.edge(weakest, "token@1") == pytest.approx(g.edge(weakest, "token@1"), rel=1e-5, abs=1e-7)
    # the command pins it through its subgraph file, and refuses more pins than the cap before attribution
    argv = _argv(
        tmp_path, tc_folder, {"interp": {"subgraph": {"pinned": [weakest]}}}, "--max-feature-nodes", "3"
    )
    assert main(argv) == 0
    doc = json.loads((tmp_path / "g" / "graph.json").read_text())
    assert weakest in {n["uid"] for n in doc["nodes"]} and doc["interp"]["subgraph"]["pinned"] == [weakest]
    strong = [str(n) for n in g.nodes if n.kind == "feature"][:2]
    argv = _argv(tmp_path, tc_folder, {"interp": {"subgraph": {"pinned": [weakest, *strong]}}})
    assert main([*argv, "--max-feature-nodes", "2"]) == 2
    assert (
        "pins 3 feature nodes, more than --max-feature-nodes 2 keeps; raise --max-feature-nodes to at least 3"
        in (_one_line(capsys))
    )
    with pytest.raises(ValueError, match="keep: L1.F15@2 is not an active feature of the prompt"):
        attribute(model, tc, PROMPT, max_logits=3, max_feature_nodes=3, keep=["L1.F15@2"], progress=False)
