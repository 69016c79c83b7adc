"""Every number in a study's README is checked against its committed results file (studies/readme_numbers.py),
and the results files are what studies/record.py writes from a report folder."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

from studies import readme_numbers, record
from studies.readme_numbers import check

STUDIES = Path(__file__).resolve().parents[2] / "studies"
READMES = sorted(p for p in STUDIES.glob("*/README.md") if (p.parent / "study.py").is_file())


NAMES = sorted(p.parent.name for p in STUDIES.glob("*/study.py"))
NOT_RECORDED: dict[str, str] = {}
"""Studies whose README does not yet cite a committed results file: strict, so recording one fails the test
until it leaves this list."""


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=NOT_RECORDED[n]))
        if n in NOT_RECORDED
        else n
        for n in NAMES
    ],
)
def test_every_study_has_a_readme_citing_its_results(name):
    readme = STUDIES / name / "README.md"
    assert readme.is_file(), f"the {name} study has no README"
    assert "<!-- results: results/" in readme.read_text(), f"{readme} cites no results file"
    assert list((STUDIES / name / "results").glob("*.json")), f"{name} has no results/*.json"


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_every_readme_number_matches_its_results_file(readme):
    problems = check(readme)
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_every_results_file_records_its_run(readme):
    for path in sorted((readme.parent / "results").glob("*.json")):
        found = json.loads(path.read_text())
        assert found["study"] == readme.parent.name
        assert found["command"].split()[:3] == ["interp", "study", found["study"]], path
        assert len(found["commit"]) == 40 and found["seed"] is not None, path
        assert "/work/" not in path.read_text() and "/root/" not in path.read_text(), path


def test_the_docstring_examples_hold():
    for module in (readme_numbers, record):
        result = doctest.testmod(module)
        assert result.attempted >= 1 and result.failed == 0


RESULTS = {
    "wall_time_s": 183.2,
    "results": {
        "winograd": {
            "switch": {
                "partial scoring": {
                    "sensitivity": {
                        "estimate": 0.5234,
                        "p_value": 0.0004,
                        "interval": {"mean": 0.5234, "ci": [0.311, 0.7049]},
                    },  # fmt: skip
                    "right_both": 67,
                }
            },
            "behaviour": [
                {"method": "full scoring", "accuracy": 0.66, "ci_low": 0.6, "ci_high": 0.71},
                {"method": "partial scoring", "accuracy": 0.7199, "ci_low": 0.6702, "ci_high": 0.7698},
            ],
        },
        "share": {"mean": 0.3321, "ci": [0.2449, 0.4183]},
        "edges": 1349,
        "gap": 3.31e-6,
        "ratio / 2": 0.5,
        "a/b": {"x": 1.5, "low": 1.25, "high": 2.5},
    },
}


def _readme(tmp_path: Path, body: str) -> Path:
    (tmp_path / "results").mkdir(parents=True)
    (tmp_path / "results" / "default.json").write_text(json.dumps(RESULTS))
    path = tmp_path / "README.md"
    path.write_text(
        "# A study\n\nRun `interp study x --top 0.5`.\n\n<!-- results: results/default.json -->\n" + body
    )
    return path


GOOD = (
    "Sensitivity +0.52 [0.31, 0.70]<!--= results/winograd/switch/partial scoring/sensitivity --> nats, right in "
    "both in 67<!--= results/winograd/switch/partial scoring/right_both --> pairs. Accuracy "
    "0.72 [0.67, 0.77]<!--= results/winograd/behaviour[method=partial scoring]/{accuracy,ci_low,ci_high} -->; "
    "share 33% [24%, 42%]<!--= results/share -->, its interval alone [0.245, 0.418]<!--= results/share -->; "
    "1,349<!--= results/edges --> edges; a gap of 3.3e-6<!--= results/gap -->; half 0.5<!--= results/ratio ~1 2 -->;"
    " 183<!--= wall_time_s --> s; 1.5 [1.25, 2.5]<!--= results/a~1b/{x,low,high} -->.\n\n"
    "| method | accuracy |\n|---|---|\n"
    "| full | 0.66<!--= results/winograd/behaviour[method=full scoring]/accuracy --> |\n"
)


def test_a_readme_whose_numbers_match_passes(tmp_path):
    assert check(_readme(tmp_path, GOOD)) == []


@pytest.mark.parametrize(
    "wrong, said",
    [
        ("0.72 [0.67, 0.77]", "0.73 [0.67, 0.77]"),  # the value, rounded otherwise than the file
        ("[0.67, 0.77]<", "[0.67, 0.78]<"),
        ("33% [24%, 42%]", "34% [24%, 42%]"),
        ("1,349<", "1,350<"),
        ("3.3e-6", "3.4e-6"),
        ("+0.52 [0.31, 0.70]", "+0.52 [0.31, 0.71]"),
    ],
)
def test_a_number_that_differs_from_its_result_fails(tmp_path, wrong, said):
    assert wrong in GOOD
    problems = check(_readme(tmp_path, GOOD.replace(wrong, said, 1)))
    assert len(problems) == 1 and "the file:" in problems[0].message


def test_an_untagged_decimal_in_a_results_region_fails_and_code_and_integers_do_not(tmp_path):
    body = GOOD + "\nAn old figure, 0.63, not regenerated. `--scale 0.25` and 24 pairs are not results.\n"
    problems = check(_readme(tmp_path, body))
    assert [p.message for p in problems] == ["0.63 has no <!--= POINTER --> saying where it is from"]
    assert problems[0].line == 5 + GOOD.count("\n") + 2  # five header lines, the body, a blank line
    after = GOOD + "\n<!-- /results -->\n\nOutside any region 0.63 is not read.\n"
    assert check(_readme(tmp_path / "b", after)) == []


def test_pointers_that_are_not_there_say_which_part(tmp_path):
    problems = check(_readme(tmp_path, "0.5<!--= results/winograd/switch/question/right_both -->\n"))
    assert problems[0].message.startswith("<!--= results/winograd/switch/question/right_both -->: ")
    assert "results/winograd/switch/question: not found" in problems[0].message
    missing = tmp_path / "other"
    missing.mkdir()
    (missing / "README.md").write_text("<!-- results: results/gone.json -->\n")
    assert "results file 'results/gone.json' is not there" in check(missing / "README.md")[0].message


def _report(folder: Path, command: list[str], results: dict) -> Path:
    folder.mkdir(parents=True)
    manifest = {"command": command, "seed": 0, "device": "cpu", "dtype": "float32", "wall_time_s": 12.5,
                "model": {"name": "smollm2-135m", "path": "/home/me/model.gguf", "sha256": "ab" * 32},
                "source": {"commit": "c" * 40, "dirty": False}}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "results.json").write_text(json.dumps({"headline": {"a": {"value": 1.0}}, "results": results}))
    return folder


def test_record_keeps_the_numbers_and_the_run_and_no_machine_paths(tmp_path):
    root = tmp_path / "studies"
    (root / "qk").mkdir(parents=True)
    (root / "qk" / "__init__.py").write_text("")
    results = {
        "items": [{"id": i} for i in range(300)],
        "heads": {"L1H0": {"p": 0.01, "curve": list(range(250))}},
        "grid": [[0.0] * 9] * 30,  # an array of 270 numbers
        "small": [[1, 2], [3, 4]],
        "curve": [{"edges": i} for i in range(200)],  # a summary table stays
    }
    command = ["/venv/bin/interp", "study", "qk", "--out", "/tmp/x/qk", "--work=/root/cache", "--pairs", "8"]
    report = _report(tmp_path / "report", command, results)
    path = record.record("qk", report, "small", root=root)
    assert path == root / "qk" / "results" / "small.json"
    found = json.loads(path.read_text())
    assert found["command"] == "interp study qk --out DIR --work=CACHE --pairs 8"
    assert found["model"] == {"name": "smollm2-135m", "sha256": "ab" * 32}  # not its path
    assert (found["commit"], found["dirty"], found["seed"], found["wall_time_s"]) == (
        "c" * 40,
        False,
        0,
        12.5,
    )
    assert found["results"] == {
        "heads": {"L1H0": {"p": 0.01}},
        "small": [[1, 2], [3, 4]],
        "curve": [{"edges": i} for i in range(200)],
    }  # long lists stay out
    assert found["headline"] == {"a": {"value": 1.0}}


def test_record_refuses_what_it_cannot_commit(tmp_path):
    root = tmp_path / "studies"
    (root / "qk").mkdir(parents=True)
    (root / "qk" / "__init__.py").write_text("")
    command = ["interp", "study", "qk", "--out", "/tmp/x"]
    with pytest.raises(ValueError, match="holds the absolute path '/home/me/data.jsonl'"):
        record.record("qk", _report(tmp_path / "a", command, {"data": "/home/me/data.jsonl"}), root=root)
    with pytest.raises(ValueError, match="not by the qk study"):
        record.record("qk", _report(tmp_path / "b", ["interp", "study", "heads"], {}), root=root)
    with pytest.raises(ValueError, match="'nope' is not a study"):
        record.record("nope", tmp_path / "a", root=root)
    with pytest.raises(ValueError, match="holds no manifest.json or results.json"):
        record.record("qk", tmp_path, root=root)
    with pytest.raises(ValueError, match="--as '../x'"):
        record.record("qk", tmp_path / "a", "../x", root=root)
