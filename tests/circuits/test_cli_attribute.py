"""``interp attribute``: writes the graph folder the library writes, and refuses bad input in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import interp
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
    assert {p.name for p in out.iterdir()} == {"graph.safetensors", "graph.json", "index.html"}
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
    ],
)
def test_bad_input_is_one_line(tmp_path, tc_folder, capsys, change, message):
    (tmp_path / "FILE").write_text("x")
    args = {"--transcoders": str(tc_folder), "--prompt": PROMPT, "--out": str(tmp_path / "g")}
    for key, value in change.items():
        args[key] = str(tmp_path / value) if key in ("--out", "--transcoders") else value
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
