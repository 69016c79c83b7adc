"""The whole folder: rows, resuming, and what one feature's failure does (the labels in graph files are tested
with them, in ``tests/circuits/test_labels.py``)."""

from __future__ import annotations

import json

import pytest

from interp.sae.explanations import (
    CachedBackend,
    ChatReply,
    EmbeddingScorer,
    Failure,
    FeatureFiles,
    ResponseCache,
    Settings,
    autointerp,
    read_rows,
)
from tests.sae.explanations.planted import PLANTED, write_folder
from tests.sae.explanations.rule_model import RuleModel

FAST = Settings(scorers=("detection", "fuzzing"), n_explain=6, n_test=10)


@pytest.fixture
def folder(tmp_path):
    return FeatureFiles.open(write_folder(tmp_path / "dash", n_examples=40))


def _run(folder, backend, out, **kwargs):
    return autointerp(
        folder, backend, out, settings=kwargs.pop("settings", FAST), chunk=kwargs.pop("chunk", 2), **kwargs
    )


def test_rows_hold_explanations_scores_hashes_and_models(folder, tmp_path):
    model = RuleModel()
    summary = _run(folder, CachedBackend(model, ResponseCache(None)), tmp_path / "out.jsonl")
    assert (summary.written, summary.failed, summary.skipped) == (3, 0, 0)
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["feature"] for r in rows] == [str(p.id) for p in PLANTED]
    for row, planted in zip(rows, PLANTED, strict=True):
        assert row["featureIndex"] == planted.id.index and row["scan"] == "planted"
        assert row["explanation"] == planted.explanation
        assert row["explainer"]["model"] == "rule-model" and row["explainer"]["answered_by"] == "rule-model"
        asked = {r.key("rule-model") for r in model.requests}
        assert row["explainer"]["prompt"] in asked
        assert row["examples"] == {"explain": 6, "test": 10, "non_activating": 10, "tokens": 32}
        for name in ("detection", "fuzzing"):
            score = row["scores"][name]
            assert (score["accuracy"], score["f1"], score["auc"], score["chance"]) == (1.0, 1.0, 1.0, 0.5)
            assert (
                len(score["prompts"]) == 4
                and set(score["prompts"]) <= asked
                and score["model"] == "rule-model"
            )
        assert row["settings"] == FAST.to_json() and "error" not in row


def test_a_rerun_asks_nothing_and_an_interrupted_run_continues(folder, tmp_path):
    out, cache = tmp_path / "out.jsonl", tmp_path / "cache.jsonl"
    first = CachedBackend(RuleModel(), ResponseCache(cache))
    assert _run(folder, first, out).asked == first.asked == 3 + 3 * 8
    again = CachedBackend(RuleModel(), ResponseCache(cache))
    summary = _run(folder, again, out)
    assert (summary.skipped, summary.written, again.asked) == (3, 0, 0)

    class Interrupting(RuleModel):
        def complete(self, requests, on_reply=None):
            if self.requests:  # the first chunk's explanations went through; stop at its scorer prompts
                raise KeyboardInterrupt
            return super().complete(requests, on_reply)

    out2, cache2 = tmp_path / "out2.jsonl", tmp_path / "cache2.jsonl"
    with pytest.raises(KeyboardInterrupt):
        _run(folder, CachedBackend(Interrupting(), ResponseCache(cache2)), out2)
    assert not out2.exists() and len(ResponseCache(cache2)) == 2  # the two explanations it received are kept
    resumed = CachedBackend(RuleModel(), ResponseCache(cache2))
    assert _run(folder, resumed, out2).written == 3 and resumed.asked == 1 + 3 * 8
    assert read_rows(out2).keys() == read_rows(out).keys()
    with open(out2, "a") as f:
        f.write('{"featureIndex": 9, "cut sh')  # a row cut short by a stop
    assert (
        len(read_rows(out2)) == 3
        and _run(folder, CachedBackend(RuleModel(), ResponseCache(cache2)), out2).written == 0
    )


def test_other_settings_make_the_rows_again(folder, tmp_path):
    out = tmp_path / "out.jsonl"
    backend = CachedBackend(RuleModel(), ResponseCache(None))
    _run(folder, backend, out)
    summary = _run(folder, backend, out, settings=Settings(scorers=("detection",), n_explain=6, n_test=10))
    assert summary.written == 3 and backend.asked == 3 + 3 * 8  # the explanations come from the cache
    rows = read_rows(out)
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3  # one row per feature, the newest
    assert all(list(r["scores"]) == ["detection"] for r in rows.values())


class Failing(RuleModel):
    """Answers nothing for one feature's explanation, and fails every request about another's."""

    def complete(self, requests, on_reply=None):
        answers = super().complete(requests)
        for i, request in enumerate(requests):
            if request.messages[-1][1].startswith("Feature: names of colours"):
                answers[i] = Failure("APIConnectionError: Connection refused")
            elif "Explanation:" in request.messages[0][1] and answers[i].text.endswith("animals"):
                answers[i] = ChatReply("  \n ", self.name)
        for i, answer in enumerate(answers):
            if on_reply is not None:
                on_reply(i, answer)
        return answers


def test_one_features_failure_is_its_own_one_line_error(folder, tmp_path):
    summary = _run(folder, CachedBackend(Failing(), ResponseCache(None)), tmp_path / "out.jsonl")
    assert (summary.written, summary.failed) == (3, 2)
    rows = read_rows(tmp_path / "out.jsonl")
    digits, colours, animals = (rows[p.id.index] for p in PLANTED)
    assert "error" not in digits and digits["scores"]["detection"]["accuracy"] == 1.0
    assert colours["error"] == (
        "detection: no answer could be read (APIConnectionError: Connection refused; APIConnectionError: "
        "Connection refused); fuzzing: no answer could be read (APIConnectionError: Connection refused; "
        "APIConnectionError: Connection refused)"
    )
    assert animals["error"] == "the explainer's answer holds no explanation: '  \\n '"
    assert summary.errors == [f"1:2: {colours['error']}", f"2:7: {animals['error']}"]


class NoFuzzing(RuleModel):
    """Answers every fuzzing prompt with text that holds no list."""

    def complete(self, requests, on_reply=None):
        answers = [
            ChatReply("I cannot tell.", self.name)
            if "<<" in r.messages[0][1] and "Feature:" in r.messages[-1][1]
            else a
            for r, a in zip(requests, super().complete(requests), strict=True)
        ]
        for i, answer in enumerate(answers):
            if on_reply is not None:
                on_reply(i, answer)
        return answers


def test_a_score_with_no_readable_answer_is_missing_not_zero(folder, tmp_path):
    summary = _run(folder, NoFuzzing(), tmp_path / "out.jsonl", features=[PLANTED[0].id])
    (row,) = read_rows(tmp_path / "out.jsonl").values()
    fuzzing = row["scores"]["fuzzing"]
    assert summary.failed == 1 and row["scores"]["detection"]["accuracy"] == 1.0
    assert not {"accuracy", "precision", "recall", "f1", "auc", "interval"} & set(fuzzing), fuzzing
    assert (fuzzing["n_positive"], fuzzing["n_negative"], fuzzing["n_failed"]) == (0, 0, 20)
    reason = (
        "no answer could be read (unreadable answer 'I cannot tell.'; unreadable answer 'I cannot tell.')"
    )
    assert fuzzing["error"] == reason and row["error"] == f"fuzzing: {reason}"
    assert len(fuzzing["prompts"]) == 4 and fuzzing["chance"] == 0.5


def test_a_feature_without_zero_runs_cannot_be_scored(tmp_path):
    root = write_folder(tmp_path, features=PLANTED[:1], n_examples=20)
    path = root / "features" / "planted" / f"{PLANTED[0].id.index}.json"
    data = json.loads(path.read_text())
    for quantile in data["examples_quantiles"]:
        for example in quantile["examples"]:
            example["tokens_acts_list"] = [a or 0.5 for a in example["tokens_acts_list"]]  # fires everywhere
    path.write_text(json.dumps(data))
    every = Settings(n_explain=6, n_test=10)
    embedding = EmbeddingScorer(NoEmbedder())
    summary = _run(
        FeatureFiles.open(root), RuleModel(), tmp_path / "out.jsonl", settings=every, embedding=embedding
    )
    (row,) = read_rows(tmp_path / "out.jsonl").values()
    assert row["examples"]["non_activating"] == 0 and summary.failed == 1
    assert row["error"].startswith(
        "detection: no non-activating example: no run of 8 tokens where the feature is zero"
    )
    assert row["scores"]["embedding"]["error"].startswith("no non-activating example: no run of 8 tokens")


def test_a_dead_feature_is_told_so_not_to_lower_n_test(tmp_path):
    """A feature with no activating example has nothing to explain, whatever --n-test is; one with too few for
    both sides is told the --n-test that would leave the explainer some."""
    root = write_folder(tmp_path, features=PLANTED[:2], n_examples=20)
    dead, few = (root / "features" / "planted" / f"{p.id.index}.json" for p in PLANTED[:2])
    data = json.loads(dead.read_text())
    for quantile in data["examples_quantiles"]:
        for example in quantile["examples"]:
            example["tokens_acts_list"] = [0.0] * len(example["tokens_acts_list"])
    dead.write_text(json.dumps(data))
    data = json.loads(few.read_text())
    data["examples_quantiles"] = [{"examples": data["examples_quantiles"][0]["examples"][:4]}]
    few.write_text(json.dumps(data))
    _run(FeatureFiles.open(root), RuleModel(), tmp_path / "out.jsonl")
    rows = read_rows(tmp_path / "out.jsonl")
    assert rows[PLANTED[0].id.index]["error"] == (
        f"{dead}: no activating example; the feature never fired in the text its dashboard was written from (a "
        "dead feature, or one too rare for that text): nothing to explain"
    )
    assert rows[PLANTED[1].id.index]["error"] == (
        f"{few}: 4 activating examples, none left for the explainer after 10 held out for scoring; give --n-test 3 "
        "or less, or write more examples per feature (interp dashboards)"
    )


class NoEmbedder:
    """An embedder that must not be asked (there is nothing to compare the explanation with)."""

    name = "none"

    def encode(self, texts):
        raise AssertionError(f"asked to embed {len(texts)} texts")
