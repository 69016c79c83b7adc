"""Features, examples and the feature files they are read from."""

from __future__ import annotations

import doctest
import json

import pytest

import interp.sae.explanations.classifier as classifier_module
import interp.sae.explanations.metrics as metrics_module
from interp.sae.explanations import (
    Example,
    FeatureFileError,
    FeatureFiles,
    FeatureId,
    FeatureRecord,
    read_feature_file,
)
from tests.reference_envs import require
from tests.sae.explanations.planted import PLANTED, SCAN, feature_file, write_folder


@pytest.mark.parametrize("module", [classifier_module, metrics_module])
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_window_puts_the_chosen_token_three_quarters_in():
    tokens = tuple(f" t{i}" for i in range(100))
    acts = tuple(float(i == 60) for i in range(100))
    window = Example(tokens, acts, 0, 60).window(32)
    assert window.tokens == tokens[36:68] and window.position == 24 and window.activations[24] == 1.0
    assert Example(tokens, acts, 0, 3).window(32).tokens == tokens[:32]  # clipped at the start
    assert Example(tokens, acts, 0, 99).window(32).tokens == tokens[68:]  # and at the end


def test_zero_windows_hold_no_activation():
    acts = [0.0] * 100
    for i in (10, 50, 51, 90):
        acts[i] = 2.0
    example = Example(tuple(f" w{i}" for i in range(100)), tuple(acts), 0, 50)
    windows = example.zero_windows(20)
    assert [w.tokens[0] for w in windows] == [" w11", " w52"]  # 11..30, then 52..71 (72..89 is too short)
    assert all(a == 0 for w in windows for a in w.activations)


def test_marks_and_levels():
    example = Example(("a", " b", " c", " d"), (0.0, 5.0, 10.0, 1.0))
    assert example.marked(example.strong(0.3)) == "a<< b c>> d"
    assert example.marked([True, False, False, True]) == "<<a>> b c<< d>>"
    assert example.levels() == [0, 5, 10, 1]


def test_split_is_disjoint_spans_the_quantiles_and_is_seeded(tmp_path):
    folder = FeatureFiles.open(write_folder(tmp_path))
    record = folder.record(PLANTED[0].id)
    explain, test = record.split(12, 20, seed=0)
    assert len(explain) == 12 and len(test) == 20
    assert not {e.text for e in explain} & {e.text for e in test}
    assert sorted({e.quantile for e in test}) == [0, 1, 2, 3] == sorted({e.quantile for e in explain})
    assert [e.quantile for e in explain] == sorted(e.quantile for e in explain)  # top examples first
    again = record.split(12, 20, seed=0)
    assert (explain, test) == again and record.split(12, 20, seed=1) != again


def test_folder_reads_the_index_and_the_files(tmp_path):
    folder = FeatureFiles.open(write_folder(tmp_path))
    assert folder.scan == SCAN and folder.features == tuple(p.id for p in PLANTED)
    record = folder.record(PLANTED[1].id)
    assert len(record.activating) == 60 and record.non_activating == ()
    assert record.density == pytest.approx(
        json.loads((tmp_path / "index.json").read_text())["features"][1]["density"]
    )
    assert {e.quantile for e in record.activating} == {0, 1, 2, 3}
    first = feature_file(PLANTED[1])["examples_quantiles"][0]["examples"][0]
    assert record.activating[0] == Example(
        tuple(first["tokens"]), tuple(first["tokens_acts_list"]), 0, first["train_token_ind"]
    )


def test_folder_without_index_lists_the_files(tmp_path):
    write_folder(tmp_path)
    (tmp_path / "index.json").unlink()
    assert FeatureFiles.open(tmp_path).features == tuple(
        sorted((p.id for p in PLANTED), key=lambda f: f.index)
    )


def test_examples_that_never_fire_are_non_activating(tmp_path):
    data = feature_file(PLANTED[0])
    words = [f" z{i}" for i in range(40)]
    zero = {
        "tokens": words,
        "tokens_acts_list": [0.0] * 40,
        "train_token_ind": 0,
        "is_repeated_datapoint": False,
    }
    data["examples_quantiles"].append({"quantile_name": "Not active", "examples": [zero]})
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data))
    record = read_feature_file(path, PLANTED[0].id)
    assert record.non_activating == (Example(tuple(words), (0.0,) * 40, 4, 0),)
    assert record.negatives(3, 32, 0)[0].text == "".join(
        words[:32]
    )  # given non-activating examples come first


def test_short_examples_are_scored_at_the_length_their_zero_runs_allow():
    """A dashboard keeps 16 tokens before an example's token and 4 after: no zero run of 32 tokens exists, so both
    kinds of example are cut to the longest length that gives enough non-activating windows."""
    examples = []
    for i in range(12):
        acts = [0.0] * 21
        acts[16] = 3.0
        if i % 2:
            acts[5] = 1.0  # a second, weaker token: zero runs of 10 and 5 tokens before the chosen one
        examples.append(Example(tuple(f" w{i}_{j}" for j in range(21)), tuple(acts), 0, 16))
    record = FeatureRecord(FeatureId(0, 1), tuple(examples))
    assert record.scoring_length(6, 32, 8) == 16  # the six examples with a clean run of 16
    assert record.scoring_length(12, 32, 8) == 10  # 6 runs of 16 and 6 of 10
    assert record.scoring_length(30, 32, 8) == 8  # the most windows: 6 x 2 + 6 x 1 = 18 < 30
    assert record.scoring_length(1, 32, 17) is None
    negatives = record.negatives(12, 10, seed=0)
    assert len(negatives) == 12 and all(len(e.tokens) == 10 and not e.active for e in negatives)
    assert [len(e.window(10).tokens) for e in examples[:2]] == [10, 10]


def test_bad_folders_and_files_are_refused_in_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        FeatureFiles.open(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"holds no feature files \(no features/<scan>/ folder\)"):
        FeatureFiles.open(tmp_path)
    (tmp_path / "features" / "empty").mkdir(parents=True)
    with pytest.raises(ValueError, match="lists no feature"):
        FeatureFiles.open(tmp_path)
    write_folder(tmp_path)
    with pytest.raises(ValueError, match=r"holds several scans \(empty, planted\); name one with --scan"):
        FeatureFiles.open(tmp_path)
    folder = FeatureFiles.open(tmp_path, "planted")
    with pytest.raises(ValueError, match=r"--features 9:9: not in .*planted \(3 features, e.g. 0:5\)"):
        folder.select([FeatureId(0, 5), FeatureId(9, 9)])
    folder.path(PLANTED[0].id).write_text('{"index": 5}')
    with pytest.raises(
        FeatureFileError, match="no 'examples_quantiles' list; not a circuit-tracer feature file"
    ):
        folder.record(PLANTED[0].id)
    folder.path(PLANTED[1].id).write_text("{not json")
    with pytest.raises(FeatureFileError, match="not a JSON feature file"):
        folder.record(PLANTED[1].id)
    folder.path(PLANTED[2].id).unlink()
    with pytest.raises(FeatureFileError, match="no such feature file, though the index lists 2:7"):
        folder.record(PLANTED[2].id)
    (tmp_path / "index.json").unlink()
    (tmp_path / "features" / "planted" / "run.json").write_text("{}")
    with pytest.raises(
        ValueError, match=r"is still being written by interp dashboards \(no index.json yet\)"
    ):
        FeatureFiles.open(tmp_path, "planted")


def test_planted_files_are_circuit_tracer_feature_files(tmp_path):
    """The files the tests write validate against circuit-tracer 0.5's own pydantic model."""
    import subprocess

    write_folder(tmp_path)
    python = require("circuit-tracer")
    script = (
        "import json, sys, pathlib\n"
        "from circuit_tracer.frontend.feature_models import Model\n"
        "for path in sorted(pathlib.Path(sys.argv[1]).glob('*.json')):\n"
        "    Model.model_validate(json.loads(path.read_text()))\n"
        "    print(path.name)\n"
    )
    result = subprocess.run(
        [str(python), "-c", script, str(tmp_path / "features" / SCAN)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(result.stdout.split()) == sorted(f"{p.id.index}.json" for p in PLANTED)
