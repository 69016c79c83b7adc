"""The coreference study on data as people have it, end to end on a tiny random Llama folder: every accepted
format from an absolute path, report names from file stems, bad files refused before the model loads, one
twin pair, the same scores from minimal and full fields, and lm-eval-harness scoring checked against
``transformers``."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import interp
from studies.coreference.measure import measure_agreement, measure_resolution
from studies.coreference.plan import report_labels
from studies.coreference.study import main
from studies.data.load import load_items, read_data
from studies.data.notes import DataWarning
from tests.studies import test_coreference_formats as formats
from tests.studies.test_coreference_twins import ROWS as IMPERFECT
from tests.studies.tiny_lm import tiny_llama_folder

DATA = Path(__file__).resolve().parents[2] / "studies" / "data"
FAST = ["--patch-pairs", "1", "--top-k", "1", "--probes", "final", "--batch-size", "8", "--quiet"]


def _texts() -> list[str]:
    rows = formats.WINOGRANDE + formats.SUPERGLUE + formats.WINOGRAD_WSC + formats.DPR + IMPERFECT
    texts = [r.get("sentence") or r.get("text") for r in rows]
    for name in ("winograd", "agreement"):
        texts += [
            json.dumps(r) for r in map(json.loads, (DATA / f"{name}.jsonl").read_text().splitlines()[:40])
        ]
    return texts


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_llama_folder(tmp_path_factory.mktemp("tiny") / "model", _texts())


def _write(folder: Path) -> dict[str, Path]:
    """One file of each accepted format under a folder whose path has spaces and dots."""
    folder.mkdir(parents=True)
    paths = {}
    for name, rows in (
        ("wino grande.dev.jsonl", formats.WINOGRANDE),
        ("super glue.val.jsonl", formats.SUPERGLUE),
        ("wsc273.hf.jsonl", formats.WINOGRAD_WSC),
        ("dpr.jsonl", formats.DPR),
        ("imperfect.jsonl", IMPERFECT),
    ):
        paths[name] = formats.jsonl(folder / name, rows)
    paths["WSCollection.xml"] = folder / "WSCollection.xml"
    paths["WSCollection.xml"].write_bytes(formats.XML.encode("latin-1"))
    paths["dpr.txt"] = folder / "dpr.txt"  # the same stem as dpr.jsonl
    paths["dpr.txt"].write_text(formats.DPR_TEXT)
    return paths


def test_report_labels_are_sanitised_and_unique():
    names = ["winograd", "/a b/my.items.v2.jsonl", "c/my.items.v2.txt", "../..", "winograd"]
    assert report_labels(names) == ["winograd", "my_items_v2", "my_items_v2-2", "data", "winograd-2"]


def test_every_format_runs_end_to_end_from_an_absolute_path(folder, tmp_path):
    paths = _write(tmp_path / "my data.v1")
    args = ["--model", str(folder), *FAST, "--out", str(tmp_path / "report")]
    for path in paths.values():
        assert path.is_absolute()
        args += ["--data", str(path)]
    with pytest.warns(UserWarning) as caught:
        assert main(args) == 0
    out = json.loads((tmp_path / "report" / "results.json").read_text())
    results, tables = out["results"], out["tables"]
    expect = {  # label: (format, the file's own ids)
        "wino_grande_dev": ("winogrande", ["3QH-1", "3QH-2", "5XY-1"]),
        "super_glue_val": ("superglue-wsc", ["10+11"]),
        "wsc273_hf": ("winograd-wsc", ["0", "1"]),
        "dpr": ("dpr", ["0", "1"]),
        "imperfect": ("resolution", [r["id"] for r in IMPERFECT]),
        "WSCollection": ("wsc-xml", ["0", "1", "2"]),
        "dpr-2": ("dpr-text", ["0", "1"]),
    }
    for label, (format, ids) in expect.items():
        assert results[label]["data"]["format"] == format
        assert [r["id"] for r in results[label]["items"]] == ids
        for record in results[label]["items"]:
            assert set(record["correct"]) == {"full", "partial", "question", "lm_eval"}
        assert f"{label}_behaviour" in tables and f"{label}_coverage" in tables
        assert (tmp_path / "report" / tables[f"{label}_behaviour"]["csv"]).is_file()
    assert not any("/" in name or " " in name for name in [*tables, *out["figures"]])
    coverage = results["imperfect"]["data"]["coverage"]
    assert coverage["pair accuracy"] == {"items": 10, "left_out": 4,
                                         "why": "twin link not returned: 2; no twin: 2"}  # fmt: skip
    assert coverage["attention from the switch word"]["items"] == 8
    assert results["imperfect"]["behaviour"][0]["pairs"] == 5
    switch = results["imperfect"]["switch"]["partial scoring"]  # the primary measure, over comparable pairs
    assert switch["n_pairs"] == results["imperfect"]["data"]["comparable_pairs"]
    assert switch["verdict"] and "imperfect_switch" in tables
    # one warning per kind of problem and data set (the imperfect file has five kinds)
    imperfect = [str(w.message) for w in caught if str(w.message).startswith("imperfect: ")]
    assert len(imperfect) == 5
    page = (tmp_path / "report" / "index.html").read_text()
    assert "WinoGrande JSONL" in page and "Winograd Schema Challenge XML" in page
    manifest = json.loads((tmp_path / "report" / "manifest.json").read_text())
    assert [d["path"] for d in manifest["data"]] == [str(p) for p in paths.values()]


@pytest.fixture
def no_model(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the data were checked")

    monkeypatch.setattr(importlib.import_module("interp.load.instantiate"), "load_checkpoint", refuse)


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        (
            [formats.WINOGRANDE[0], {**formats.WINOGRANDE[1], "answer": "0"}],
            [":2: item '3QH-2'", "out of range"],
        ),
        ([formats.WINOGRAD_WSC[0], "{oops"], [":2:", "not valid JSON"]),
        ([formats.WINOGRANDE[0], formats.DPR[0]], [":2: item '1'", "a file holds one kind only"]),
    ],
)
def test_a_bad_file_is_refused_before_the_model_loads(tmp_path, no_model, rows, words):
    good = formats.jsonl(tmp_path / "good.jsonl", formats.WINOGRANDE)
    bad = formats.jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(ValueError) as info:
        main(["--data", str(good), "--data", str(bad), "--out", str(tmp_path / "out"), "--quiet"])
    for word in [str(bad), *words]:
        assert word in str(info.value)
    assert not (tmp_path / "out").exists()


def test_the_command_line_says_it_in_one_line(tmp_path, no_model, capsys):
    from interp.cli import main as cli

    bad = formats.jsonl(tmp_path / "bad.jsonl", [{**formats.WINOGRAD_WSC[0], "pronoun_loc": 3}])
    assert cli(["study", "coreference", "--data", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"interp: error: {bad}:1: item '0': pronoun 'they' is not at offset 3"
    )


def test_format_flag_needs_a_file(tmp_path):
    with pytest.raises(SystemExit):
        main(["--format", "winogrande", "--data", "winograd", "--out", str(tmp_path / "out")])


def test_one_twin_pair_runs_and_says_what_it_skipped(folder, tmp_path):
    out = tmp_path / "one pair"
    assert main(["--model", str(folder), "--data", "winograd", "--limit", "2", *FAST, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())["results"]["winograd"]
    assert [r["id"] for r in results["items"]] == ["wg-001a", "wg-001b"]
    assert results["behaviour"][0]["n"] == 2 and results["behaviour"][0]["pairs"] == 1
    assert results["pairs_used"] == 1 and results["heads"] == [] and results["probes"] == []
    coverage = results["data"]["coverage"]
    assert coverage["held-out head test"]["items"] == 0
    assert "needs at least 2 schemas and these 2 item(s) form 1" in coverage["held-out head test"]["why"]
    assert "takes two schemas or more" in coverage["probes"]["why"]
    page = (out / "index.html").read_text()
    assert "No held-out head test" in page and "Probes are trained on some schemas" in page


def _minimal(tmp_path: Path, name: str, fields: tuple[str, ...], n: int) -> list:
    rows = [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()[:n]]
    return read_data(formats.jsonl(tmp_path / f"{name}-minimal.jsonl", formats._strip(rows, fields))).items


def test_minimal_and_full_fields_give_identical_scores(folder, tmp_path):
    model = interp.load(str(folder))
    fields = ("schema_id", "candidate_char_offsets", "switch_word", "switch_char_offset")
    for name, fn, strip in (
        ("winograd", measure_resolution, fields),
        ("agreement", measure_agreement, ("schema_id", "distractor_char_offset")),
    ):
        full = load_items(name)[:12]
        minimal = _minimal(tmp_path, name, strip, 12)
        a = fn(model, full, batch_size=6, progress=False)
        b = fn(model, minimal, batch_size=6, progress=False)
        for x, y in zip(a, b, strict=True):
            assert {k: v for k, v in x.record.items() if k != "schema_id"} == {
                k: v for k, v in y.record.items() if k != "schema_id"
            }
            np.testing.assert_array_equal(x.mass, y.mass)
            assert x.positions == y.positions
            for role in x.features:
                np.testing.assert_array_equal(x.features[role], y.features[role])


def _hf_logprob(hf, tokenizer, context: str, continuation: str, bos: int | None) -> float:
    """lm-eval-harness's loglikelihood: tokens of context + continuation after those of the context."""
    start = [] if bos is None else [bos]
    whole = start + tokenizer.encode(context + continuation).ids
    n_context = len(start) + len(tokenizer.encode(context).ids)
    with torch.no_grad():
        logprobs = hf(torch.tensor([whole])).logits[0].float().log_softmax(-1)
    return float(sum(logprobs[p - 1, whole[p]] for p in range(n_context, len(whole))))


@pytest.mark.parametrize("bos", [False, True])
def test_lm_eval_scoring_matches_transformers(folder, tmp_path, bos):
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    hf = LlamaForCausalLM.from_pretrained(folder).eval()
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    rows = [
        # "his": the option gets "'s" and its leading "The" is lower-cased, as lm-eval does it
        formats.jsonl(
            tmp_path / "his.jsonl",
            [
                {
                    "id": "h",
                    "sentence": "Tom hit the man because his arm slipped.",
                    "pronoun": "his",
                    "pronoun_char_offset": 24,
                    "candidates": ["The man", "Tom"],
                    "answer": 1,
                }
            ],
        ),  # fmt: skip
        formats.jsonl(tmp_path / "wg.jsonl", formats.WINOGRANDE[:2]),
    ]
    contexts = [
        [
            ("Tom hit the man because the man's", " arm slipped."),
            ("Tom hit the man because Tom's", " arm slipped."),
        ],
        [
            (formats.WINOGRANDE[0]["sentence"][:59] + option, " is too large.")
            for option in ("trophy", "suitcase")
        ],
    ]
    model = interp.load(str(folder))
    for path, expected in zip(rows, contexts, strict=True):
        item = load_items(path)[0]
        (measured,) = measure_resolution(model, [item], batch_size=2, progress=False, bos=bos)
        for c, (context, continuation) in enumerate(expected):
            want = _hf_logprob(hf, tokenizer, context, continuation, 0 if bos else None)
            assert measured.record["lm_eval"][c] == pytest.approx(want, abs=1e-4)
        if not bos:  # full scoring: every token but the first, which nothing predicts without BOS
            text = item.sentence.replace(item.pronoun, item.candidates[0], 1) if item.blank else None
            if text is not None:
                ids = tokenizer.encode(text).ids
                with torch.no_grad():
                    logprobs = hf(torch.tensor([ids])).logits[0].float().log_softmax(-1)
                want = float(sum(logprobs[p - 1, ids[p]] for p in range(1, len(ids))))
                assert measured.record["full"][0] == pytest.approx(want, abs=1e-4)


def test_behaviour_table_says_whether_bos_was_prepended(folder, tmp_path):
    path = formats.jsonl(tmp_path / "wg.jsonl", formats.WINOGRANDE)
    for flag, expected in (("--no-prepend-bos", False), ("--prepend-bos", True)):
        out = tmp_path / flag
        with pytest.warns(DataWarning, match="wg: 1 item"):
            assert main(["--model", str(folder), "--data", str(path), flag, *FAST, "--probes", "none",
                         "--out", str(out)]) == 0  # fmt: skip
        rows = json.loads((out / "results.json").read_text())["results"]["wg"]["behaviour"]
        assert {r["bos_prepended"] for r in rows} == {expected}
        assert [r["method"] for r in rows][:4] == ["full scoring", "partial scoring", "question scoring",
                                                   "partial scoring, lm-eval-harness rules"]  # fmt: skip
