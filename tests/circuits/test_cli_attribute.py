"""``interp attribute``: writes the graph folder the library writes, and refuses bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import interp
from interp.analysis.node import Node
from interp.circuits import AttributionGraph, attribute
from interp.cli import main
from interp.sae import load_transcoders, save_transcoders
from tests.circuits.transcoders import tiny_transcoders

LLAMA = Path(__file__).parent / "golden" / "llama"
PROMPT = "w17 w33 w5 w48"


@pytest.fixture(scope="module")
def tc_folder(tmp_path_factory):
    model = interp.load(str(LLAMA))
    folder = tmp_path_factory.mktemp("tc")
    save_transcoders(tiny_transcoders(model.cfg, d_transcoder=16, seed=7), folder)
    return folder


def test_writes_the_graph_folder(tmp_path, tc_folder, capsys):
    out = tmp_path / "graph"
    rc = main(["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT, "--out", str(out),
               "--max-logits", "3", "--batch-size", "8", "--quiet"])  # fmt: skip
    assert rc == 0
    assert {p.name for p in out.iterdir()} == {
        "graph.safetensors",
        "graph.json",
        "graph-metadata.json",
        "index.html",
        "graph-manifest.json",
    }
    assert "replacement" in capsys.readouterr().out
    got = AttributionGraph.load(out)
    model = interp.load(str(LLAMA))
    expected = attribute(
        model, load_transcoders(tc_folder, model=model), PROMPT, max_logits=3, progress=False
    )
    assert got.input_tokens.tolist()[0] == 0  # the prompt's BOS, put first as circuit-tracer does
    assert torch.equal(got.features, expected.features)
    torch.testing.assert_close(got.adjacency, expected.adjacency)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--out": "FILE"}, "is a file, not a folder"),
        ({"--transcoders": "missing"}, "is not a folder"),
        ({"--target": "w3 w4"}, "is 2 tokens"),
        ({"--prompt": "   "}, "--prompt is empty"),
        ({"--store": "missing"}, "is not an activation store"),
    ],
)
def test_bad_input_is_one_line(tmp_path, tc_folder, capsys, change, message):
    (tmp_path / "FILE").write_text("x")
    args = {"--transcoders": str(tc_folder), "--prompt": PROMPT, "--out": str(tmp_path / "g")}
    for key, value in change.items():
        args[key] = str(tmp_path / value) if key in ("--out", "--transcoders", "--store") else value
    argv = ["attribute", str(LLAMA), "--quiet", *(x for kv in args.items() for x in kv)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_bad_numbers_are_refused_by_the_parser(tmp_path, tc_folder, capsys):
    base = [
        "attribute",
        str(LLAMA),
        "--transcoders",
        str(tc_folder),
        "--prompt",
        PROMPT,
        "--out",
        str(tmp_path),
    ]
    assert main([*base, "--max-feature-nodes", "0"]) == 2
    assert main([*base, "--logit-probability", "1.5"]) == 2
    assert "expected a number in [0, 1]" in capsys.readouterr().err


def test_top_contexts_from_an_activation_store(tmp_path, tc_folder):
    from interp.circuits.features.contexts import top_contexts
    from interp.store import cache_activations

    model = interp.load(str(LLAMA))
    tc = load_transcoders(tc_folder, model=model)
    texts = ["w5 w9 w17 w33", "w40 w41 w5 w6 w7", PROMPT, "w17 w17 w18"]
    hooks = [tc.input_hook(layer) for layer in tc.layers]
    store = cache_activations(model, texts, hooks, tmp_path / "store", shard_rows=5, progress=False)
    found = top_contexts(store, tc, [(1, 3), (0, 7)], k=2, window=2)
    # by hand: every token of every text, ranked by the feature's activation
    for (layer, feat), shown in found.items():
        scored = []
        for text in texts:
            ids = model.to_tokens(text).ids
            _, cache = model.run_with_cache(ids, names_filter=[tc.input_hook(layer)])
            acts = tc.encode(cache[tc.input_hook(layer)][0], layer)[1][:, feat]
            words = model.to_str_tokens(text)
            for p, a in enumerate(acts.tolist()):
                marked = "".join(f"[[{w}]]" if q == p else w for q, w in enumerate(words) if p - 2 <= q <= p)
                scored.append((a, marked))
        scored.sort(key=lambda x: -x[0])
        assert shown == [m for a, m in scored[:2] if a > 0]
    out = tmp_path / "cli"
    argv = ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", PROMPT, "--out", str(out),
            "--store", str(tmp_path / "store"), "--quiet"]  # fmt: skip
    assert main(argv) == 0 and "[[" in (out / "index.html").read_text()
    graph = attribute(model, tc, PROMPT, max_logits=2, progress=False)
    graph.save(
        tmp_path / "g", node_threshold=1.0, edge_threshold=1.0, model=model, transcoders=tc, contexts=store
    )
    page = (tmp_path / "g" / "index.html").read_text()
    data = json.loads(page.split('id="graph-data">', 1)[1].split("</script>", 1)[0])
    shown = {key: info["contexts"] for key, info in data["features"].items()}
    assert shown and any(shown.values())  # the prompt is in the store: its features have contexts
    for key, contexts in shown.items():
        node = Node.parse(key)
        layer, feat = node.layer, node.feature
        assert contexts == top_contexts(store, tc, [(layer, feat)])[(layer, feat)]
