"""Feature files as values: what interp writes reads back byte for byte, a file of circuit-tracer's bare schema
keeps only its own fields, a bad file is refused in one line; scans are found one way, in every layout."""

from __future__ import annotations

import json

import pytest

from interp.feature_id import FeatureId
from interp.sae.dashboards import FeatureFile, FeatureFileError, Scan, Settings, find_scans, write_dashboards
from interp.sae.dashboards.link import resolve
from tests.sae.dashboards import helpers

BARE = {
    "transcoder_id": "gemma-clt",
    "index": 227,
    "examples_quantiles": [
        {
            "quantile_name": "Top activations",
            "examples": [
                {"tokens_acts_list": [0.0, 2.5], "train_token_ind": 1, "is_repeated_datapoint": False,
                 "tokens": ["a", "b"]}
            ],
        }
    ],
    "top_logits": ["x"],
    "bottom_logits": ["y"],
    "act_min": 0.5,
    "act_max": 2.5,
    "quantile_values": [],
    "histogram": [1.0],
    "activation_frequency": 0.01,
}  # fmt: skip


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    model = helpers.model()
    out = tmp_path_factory.mktemp("files")
    tc = helpers.dictionary("clt", model)
    return write_dashboards(model, tc, out, helpers.texts(), scan="tc", settings=Settings(sample=8)).folder


def test_every_written_file_reads_back_to_the_same_bytes(written):
    files = sorted(written.glob("[0-9]*.json"))
    assert len(files) == 32
    for path in files:
        text = path.read_text(encoding="utf-8")
        file = FeatureFile.from_json(text, str(path))
        assert file.to_json() == text
        assert file.id.index == file.index == int(path.stem)


def test_a_file_of_circuit_tracers_bare_schema_keeps_its_fields_and_no_others():
    file = FeatureFile.from_dict(BARE)
    assert json.loads(file.to_json()) == BARE and list(file.to_dict()) == list(BARE)
    assert file.id == FeatureId(3, 17) and file.layer is None and file.n_tokens is None
    small = file.compact(top=1, per_group=0)
    assert small.quantile_values == [] and small.examples == file.examples


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"examples_quantiles": None}, "no 'examples_quantiles' list; not a circuit-tracer feature file"),
        ({"examples_quantiles": [{"quantile_name": "q"}]}, "quantile 0 has no 'examples' list"),
        (
            {"examples_quantiles": [{"examples": [{"tokens": ["a"], "tokens_acts_list": [1.0, 2.0]}]}]},
            "example 0 of quantile 0 has 1 tokens but 2 activations; a feature file gives one per token",
        ),
        (
            {"examples_quantiles": [{"examples": [{"tokens": ["a"]}]}]},
            "example 0 of quantile 0 is not tokens plus",
        ),
        ({"act_max": "big"}, 'act_max is "big", not a number'),
        ({"index": 2.5}, "index is 2.5, not a whole number"),
    ],
)
def test_a_bad_file_is_refused_in_one_line_naming_it(change, message):
    with pytest.raises(FeatureFileError) as err:
        FeatureFile.from_dict({**BARE, **change}, "dash/features/tc/227.json")
    assert str(err.value).startswith("dash/features/tc/227.json: ") and message in str(err.value)
    with pytest.raises(FeatureFileError, match="227.json: not a JSON feature file"):
        FeatureFile.from_json("{", "227.json")


def test_scans_are_found_one_way_in_every_layout(written, tmp_path):
    out = written.parent.parent
    assert find_scans(out) == [written] and find_scans(written) == [written]
    assert find_scans(tmp_path) == []
    for name in ("b", "a"):
        (tmp_path / "features" / name).mkdir(parents=True)
    assert find_scans(tmp_path) == [tmp_path / "features" / "a", tmp_path / "features" / "b"]
    with pytest.raises(FileNotFoundError, match="holds no finished dashboards"):
        resolve(tmp_path)  # folders without index.json are not finished
    assert resolve(out) == written


def test_a_scan_lists_its_features_from_its_index_one_above_it_or_its_file_names(tmp_path):
    scan = tmp_path / "features" / "ct"
    scan.mkdir(parents=True)
    for fid in (FeatureId(3, 17), FeatureId(0, 2)):
        (scan / f"{fid.index}.json").write_text(json.dumps({**BARE, "index": fid.index}))
    assert Scan(scan).features() == ([FeatureId(0, 2), FeatureId(3, 17)], {})  # by file names
    (tmp_path / "index.json").write_text(json.dumps([{"featureIndex": 227, "density": 0.5}]))
    assert Scan(scan).features() == ([FeatureId(3, 17)], {FeatureId(3, 17): 0.5})  # circuit-tracer's index
    assert Scan(scan).files([FeatureId(3, 17), FeatureId(9, 9)]) == {
        FeatureId(3, 17): FeatureFile.from_dict(BARE)
    }
    (scan / "run.json").write_text("{}")
    with pytest.raises(ValueError, match="is still being written by interp dashboards"):
        Scan(scan).features()
