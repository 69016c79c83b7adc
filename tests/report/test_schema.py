"""validate_manifest and validate_results accept what the writer writes and reject broken dicts."""

from __future__ import annotations

import copy
import json

import pytest

from interp.report import ReportSchemaError, validate_manifest, validate_results
from tests.report.conftest import build_report


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = build_report(tmp_path_factory.mktemp("schema") / "r").write()
    return json.loads((out / "manifest.json").read_text()), json.loads((out / "results.json").read_text())


def test_written_files_validate(written):
    manifest, results = written
    validate_manifest(manifest)
    validate_results(results, required=["scores", "label"])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m.pop("seed"), "lacks key 'seed'"),
        (lambda m: m.update(seed="0"), "manifest['seed'] must be int or null"),
        (lambda m: m.update(seed=True), "manifest['seed'] must be int or null, got bool"),
        (lambda m: m.update(command="interp study"), "manifest['command'] must be list"),
        (lambda m: m.update(wall_time_s=-1.0), "must be >= 0"),
        (lambda m: m.update(extra=1), "unexpected key 'extra'"),
        (lambda m: m.update(schema="other/1"), "expected 'interp.report.manifest/1'"),
        (lambda m: m["versions"].pop("python"), "manifest['versions'] lacks key"),
        (lambda m: m["versions"].update(torch=2), "manifest['versions']['torch'] must be str or null"),
        (lambda m: m["files"].update({"index.html": "abc"}), "must be a hex SHA-256"),
        (
            lambda m: m.update(data=[{"path": "x", "sha256": "0" * 64}]),
            "manifest['data'][0] lacks key 'bytes'",
        ),
        (lambda m: m["config"].update(x=float("nan")), "write non-finite numbers as null"),
    ],
)
def test_broken_manifests_are_rejected(written, edit, message):
    manifest = copy.deepcopy(written[0])
    edit(manifest)
    with pytest.raises(ReportSchemaError) as err:
        validate_manifest(manifest)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("headline"), "lacks key 'headline'"),
        (lambda r: r.update(title=3), "results['title'] must be str"),
        (lambda r: r["headline"]["accuracy"].update(ci=[1]), "must be null or [low, high]"),
        (lambda r: r["headline"]["accuracy"].update(value=[1, 2]), "must be a number, string, bool or null"),
        (lambda r: r["figures"].update(scores="elsewhere.png"), "must be 'figures/scores.png'"),
        (lambda r: r["tables"]["items"].update(rows="150"), "['rows'] must be int"),
        (lambda r: r["results"].update(x=float("inf")), "write non-finite numbers as null"),
        (lambda r: r["results"].update(x={1: 2}), "non-string key 1"),
        (lambda r: r["results"].update(x=object()), "non-JSON type object"),
    ],
)
def test_broken_results_are_rejected(written, edit, message):
    results = copy.deepcopy(written[1])
    edit(results)
    with pytest.raises(ReportSchemaError) as err:
        validate_results(results)
    assert message in str(err.value)


def test_required_result_keys_and_all_problems_listed(written):
    results = copy.deepcopy(written[1])
    results.pop("title")
    with pytest.raises(ReportSchemaError) as err:
        validate_results(results, required=["scores", "accuracy_by_layer"])
    assert err.value.problems == [
        "results lacks key 'title'",
        "results['results'] lacks required key 'accuracy_by_layer'",
    ]


@pytest.mark.parametrize("bad", [None, [], "manifest"])
def test_non_dicts_are_rejected(bad):
    with pytest.raises(ReportSchemaError, match="must be an object"):
        validate_manifest(bad)
    with pytest.raises(ReportSchemaError, match="must be an object"):
        validate_results(bad)
