"""Explanations on a folder written by the real ``interp dashboards`` pass, with a graph saved beside it by
``interp attribute --dashboards``: the folder read back example for example, and explanations labelling the
graph's feature nodes (a tiny Llama model with a tokenizer, random per-layer transcoders)."""

from __future__ import annotations

import json

import pytest

from interp.circuits.features.labels import add_labels
from interp.cli import main
from interp.sae import save_transcoders
from interp.sae.explanations import (
    CachedBackend,
    FeatureFiles,
    FeatureId,
    ResponseCache,
    Settings,
    autointerp,
    read_rows,
)
from tests.circuits.transcoders import tiny_transcoders
from tests.sae.dashboards import helpers
from tests.sae.explanations.rule_model import RuleModel

LLAMA = str(helpers.LLAMA)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``OUT`` holding dashboards of every feature (scan ``tc``) and a graph (``cats.json``) linked to them."""
    root = tmp_path_factory.mktemp("real")
    model = helpers.model()
    save_transcoders(tiny_transcoders(model.cfg, d_transcoder=12, seed=3), root / "tc")
    (root / "texts.txt").write_text("\n".join(helpers.texts(60)) + "\n")
    out = root / "run"
    assert main(["dashboards", LLAMA, "--dictionary", str(root / "tc"), "--data", str(root / "texts.txt"),
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    assert main(["attribute", LLAMA, "--transcoders", str(root / "tc"), "--prompt", "w17 w33 w5 w48", "--out",
                 str(out), "--dashboards", str(out), "--slug", "cats", "--node-threshold", "1", "--edge-threshold",
                 "1", "--quiet"]) == 0  # fmt: skip
    return out


def test_the_feature_files_read_back_as_written(run):
    files = FeatureFiles.open(run)
    index = json.loads((run / "features" / "tc" / "index.json").read_text())
    assert files.scan == "tc"
    assert [(f.layer, f.feature, f.index) for f in files.features] == [
        (r["layer"], r["feature"], r["featureIndex"]) for r in index["features"]
    ]
    assert files.density == {r["featureIndex"]: r["density"] for r in index["features"]}
    for fid in files.features:
        data = json.loads(files.path(fid).read_text())
        record = files.record(fid)
        shown = [
            (q, tuple(e["tokens"]), tuple(e["tokens_acts_list"]), e["train_token_ind"])
            for q, group in enumerate(data["examples_quantiles"])
            for e in group["examples"]
        ]
        read = [(e.quantile, e.tokens, e.activations, e.position) for e in record.activating]
        # every example the dashboards show fires at its own token, so every one is an activating example
        assert read == shown and not record.non_activating
        assert all(e.activations[e.position] > 0 for e in record.activating)


def test_explanations_label_the_graph_beside_the_dashboards(run, tmp_path):
    graph = json.loads((run / "cats.json").read_text())
    nodes = [n for n in graph["nodes"] if n["feature_type"] == "cross layer transcoder"]
    wanted = sorted({FeatureId.from_index(n["feature"]) for n in nodes})
    assert wanted and all((run / "features" / "tc" / f"{f.index}.json").is_file() for f in wanted)
    files = FeatureFiles.open(run)
    backend = CachedBackend(RuleModel(), ResponseCache(tmp_path / "cache.jsonl"))
    settings = Settings(scorers=("detection",), n_explain=2, n_test=1, min_context=1)
    summary = autointerp(files, backend, tmp_path / "rows.jsonl", features=wanted, settings=settings)
    rows = read_rows(tmp_path / "rows.jsonl")
    assert summary.written == len(wanted) and sorted(rows) == sorted(f.index for f in wanted)
    # the rule model names the class most marked words belong to; these texts hold none: the first class
    assert {r["explanation"] for r in rows.values()} == {"numbers written in digits"}
    (done,) = add_labels(run, {i: r["explanation"] for i, r in rows.items()}, files.scan)
    assert (done.path.name, done.labelled, done.skipped) == ("cats.json", len(nodes), None)
    labelled = json.loads((run / "cats.json").read_text())["nodes"]
    assert [n["clerp"] for n in labelled if n["feature_type"] == "cross layer transcoder"] == [
        "numbers written in digits"
    ] * len(nodes)
    assert [n["clerp"] for n in labelled if n["feature_type"] != "cross layer transcoder"] == [
        n["clerp"] for n in graph["nodes"] if n["feature_type"] != "cross layer transcoder"
    ]  # token, error and logit nodes keep theirs
    again = CachedBackend(RuleModel(), ResponseCache(tmp_path / "cache.jsonl"))
    autointerp(files, again, tmp_path / "again.jsonl", features=wanted, settings=settings)
    assert again.asked == 0 and read_rows(tmp_path / "again.jsonl") == rows
