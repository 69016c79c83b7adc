"""The scorers against eai-delphi 0.1.3's own, on identical inputs: the same examples, the same explanation, and
the same model answers.

delphi runs live in its reference environment (:mod:`tests.reference_envs`, ``delphi``), through
``delphi_reference.py``. Both sides get the answers from a record, looked up by each example's plain text, so
their different prompts and shuffles do not matter: what is compared is how each builds its samples, reads an
answer (and the probabilities in its likeliest tokens), and computes its metrics. Two records:

- the packaged SmolLM2-135M-Instruct's real answers, one example per prompt (``golden/smollm2_answers.json``,
  written by ``golden/record_answers.py``): raw texts and token alternatives as the model gave them;
- answers drawn here, seeded: each right with probability 3/4, some in forms that cannot be read, each with a
  confidence, so that the metrics are not trivial.

The embedding score is compared against delphi's ``EmbeddingScorer`` run with sentence-transformers on the
same MiniLM folder; the metric functions on their own against delphi's on random predictions.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
from pathlib import Path

import pytest

import interp
from interp.load.packaged import packaged_path
from interp.sae.explanations import (
    ChatReply,
    DetectionScorer,
    EmbeddingScorer,
    Failure,
    FuzzingScorer,
    SentenceEmbedder,
)
from interp.sae.explanations.chat import TokenChoice
from interp.sae.explanations.metrics import auc, classifier_metrics
from tests.reference_envs import require
from tests.sae.explanations.parity_cases import ANSWERS, cases, plain

SCRIPT = Path(__file__).with_name("delphi_reference.py")
_PASSAGE = re.compile(r"^Passage \d+: (.*)$", flags=re.M)
SCORERS = {"detection": DetectionScorer, "fuzzing": FuzzingScorer}


class Replay:
    """A backend that answers from a record of answers keyed by plain text (one example: the recorded answer as
    it was; several: the list of their recorded 0s and 1s)."""

    name = "recorded"

    def __init__(self, answers: dict[str, dict]) -> None:
        self.answers = answers

    def complete(self, requests, on_reply=None):
        replies = []
        for request in requests:
            recorded = [self.answers[plain(t)] for t in _PASSAGE.findall(request.messages[-1][1])]
            if len(recorded) == 1:
                tokens = recorded[0]["tokens"]
                choices = None
                if request.top_logprobs and tokens is not None:
                    choices = tuple(TokenChoice(t, tuple((a, lp) for a, lp in top)) for t, top in tokens)
                replies.append(ChatReply(recorded[0]["text"], self.name, choices))
            else:
                replies.append(ChatReply("[" + ", ".join(str(r["label"]) for r in recorded) + "]", self.name))
        for i, reply in enumerate(replies):
            if on_reply is not None:
                on_reply(i, reply)
        return replies


def drawn_answers(case, scorer: str, seed: int) -> dict[str, dict]:
    """Answers right 3 times in 4, a sixth unreadable, each with a confidence in its likeliest tokens."""
    rng = random.Random(f"{seed}:{scorer}:{case.name}")
    answers = {}
    truth = [(e.text, True) for e in case.test] + [(e.text, False) for e in case.negatives]
    for text, activating in truth:
        label = int(activating) if rng.random() < 0.75 else int(not activating)
        confidence = rng.uniform(0.5, 0.99)
        top = [[str(label), math.log(confidence)], [str(1 - label), math.log(1 - confidence) - 0.01]]
        tokens = [["[", [["[", 0.0]]], [str(label), top], ["]", [["]", 0.0]]]]
        form = rng.random()
        if form < 0.06:
            answers[text] = {"text": f"[{label}, {label}]", "tokens": None, "label": label}  # one too many
        elif form < 0.12:
            answers[text] = {"text": "yes" if label else "no", "tokens": None, "label": label}
        elif form < 0.17:
            answers[text] = {"text": f"[{'true' if label else 'false'}]", "tokens": tokens, "label": label}
        else:
            answers[text] = {"text": f"[{label}]", "tokens": tokens, "label": label}
    return answers


def _example(e, quantile=True):
    return {
        "tokens": list(e.tokens),
        "activations": list(e.activations),
        **({"quantile": e.quantile} if quantile else {}),
    }


@pytest.fixture(scope="module")
def delphi(tmp_path_factory):
    """Every case scored by delphi, and the same cases as this package sees them."""
    python = require("delphi")
    root = tmp_path_factory.mktemp("parity")
    recorded = json.loads(ANSWERS.read_text())
    runs, inputs = [], []
    for case in cases(root / "dash"):
        for scorer in SCORERS:
            sources = {
                "smollm2": (recorded[f"{scorer}|{case.name}"], 1, True),
                "drawn": (drawn_answers(case, scorer, 0), 1, True),
                "drawn-lists": (drawn_answers(case, scorer, 1), 4, False),
                "drawn-short-last": (drawn_answers(case, scorer, 1), 5, False),
            }
            for source, (answers, per_prompt, log_prob) in sources.items():
                runs.append((case, scorer, source, answers, per_prompt, log_prob))
                inputs.append(
                    {
                        "kind": scorer,
                        "explanation": case.explanation,
                        "test": [_example(e) for e in case.test],
                        "negatives": [_example(e, quantile=False) for e in case.negatives],
                        "answers": answers,
                        "per_prompt": per_prompt,
                        "log_prob": log_prob,
                    }
                )
        inputs.append(
            {
                "kind": "embedding",
                "model": str(packaged_path("minilm-l6")),
                "explanation": case.explanation,
                "test": [_example(e) for e in case.test],
                "negatives": [_example(e, quantile=False) for e in case.negatives],
            }
        )
        runs.append((case, "embedding", None, None, None, None))
    rng = random.Random(5)
    truth = [rng.random() < 0.5 for _ in range(64)]
    predictions = [None if rng.random() < 0.1 else rng.random() < 0.6 for _ in range(64)]
    probabilities = [None if p is None else round(rng.random(), 3) for p in predictions]
    inputs.append(
        {"kind": "metrics", "truth": truth, "predictions": predictions, "probabilities": probabilities}
    )
    runs.append(((truth, predictions, probabilities), "metrics", None, None, None, None))
    (root / "in.json").write_text(json.dumps(inputs))
    result = subprocess.run(
        [str(python), str(SCRIPT), str(root / "in.json"), str(root / "out.json")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return list(zip(runs, json.loads((root / "out.json").read_text()), strict=True))


def _classifier_runs(delphi, source):
    return [(run, out) for run, out in delphi if run[1] in SCORERS and run[2] == source]


@pytest.mark.parametrize("source", ["smollm2", "drawn", "drawn-lists"])
def test_classifiers_match_delphi(delphi, source):
    runs = _classifier_runs(delphi, source)
    assert len(runs) == 12  # three features, two explanations, two scorers
    read = with_auc = 0
    for (case, scorer_name, _, answers, per_prompt, log_prob), theirs in runs:
        scorer = SCORERS[scorer_name](per_prompt=per_prompt, probabilities=log_prob)
        judged_all, ours = _ours(scorer, case, answers)
        mine = {plain(j.sample.text): j for j in judged_all}
        assert len(mine) == len(theirs["samples"]) == 2 * len(case.test)
        for sample in theirs["samples"]:
            judged = mine[sample["text"]]
            assert judged.sample.activating == sample["activating"]
            assert judged.prediction == sample["prediction"], (scorer_name, sample, answers[sample["text"]])
            if sample["probability"] is None:
                assert judged.probability is None
            else:
                assert judged.probability == pytest.approx(sample["probability"], rel=1e-12)
            read += sample["prediction"] is not None
        d = theirs["metrics"]
        if d["total_positives"] and d["total_negatives"]:
            m = ours.metrics
            assert (m.n_positive, m.n_negative) == (d["total_positives"], d["total_negatives"])
            assert (m.accuracy, m.precision, m.recall, m.f1) == pytest.approx(
                (d["accuracy"], d["precision"], d["recall"], d["f1_score"]), abs=1e-12
            )
            assert (m.auc is None) == (d["auc"] is None) and (
                m.auc is None or m.auc == pytest.approx(d["auc"], abs=1e-12)
            )
            with_auc += m.auc is not None
        else:  # the one deliberate difference in metrics: delphi reports 0 computed from nothing, here missing
            assert (d["accuracy"], d["precision"], d["recall"], d["f1_score"]) == (0, 0, 0, 0)
            assert isinstance(ours, Failure) and ours.reason.startswith("no answer")
            counts = (ours.recorded["n_positive"], ours.recorded["n_negative"])
            assert counts == (d["total_positives"], d["total_negatives"])
        shown = [plain(t) for t in theirs["shown"]]
        assert sorted(shown) == sorted(mine)  # every example shown once, on both sides
        if scorer_name == "fuzzing":
            _same_marks(judged_all, theirs["shown"], case)
    if source != "smollm2":
        assert read > 0.8 * 12 * 16  # mostly readable: the metrics compared are not all empty
    if source == "drawn":
        assert with_auc == 12  # probabilities read on both sides


def test_smollm2_answers_are_unreadable_alike(delphi):
    """The 135M model, asked about one example, writes lists of several entries (the worked examples show
    several) or stops mid-list: both sides read none of them, so every judgement is unread and the metrics count
    no example. The same record with one answer made readable ("[1]") is read here as exactly that judgement: the
    reader reads, and what it refuses in SmolLM2's record is the answers themselves."""
    runs = _classifier_runs(delphi, "smollm2")
    assert len(runs) == 12
    for (case, scorer_name, _, answers, per_prompt, log_prob), theirs in runs:
        scorer = SCORERS[scorer_name](per_prompt=per_prompt, probabilities=log_prob)
        judged, ours = _ours(scorer, case, answers)
        n = 2 * len(case.test)
        assert [j.prediction for j in judged] == [None] * n
        assert [s["prediction"] for s in theirs["samples"]] == [None] * n
        assert isinstance(ours, Failure) and ours.reason.startswith("no answer")
        assert (ours.recorded["n_positive"], ours.recorded["n_negative"]) == (0, 0)
        text = plain(case.test[0].text)
        planted = {**answers, text: {"text": "[1]", "tokens": None, "label": 1}}
        again, _ = _ours(scorer, case, planted)
        assert [(plain(j.sample.text), j.prediction) for j in again if j.prediction is not None] == [
            (text, True)
        ]


def _ours(scorer, case, answers):
    """Each sample as read here, and the score (or the failure that stands for it)."""
    backend = Replay(answers)
    prepared = scorer.prepare(case.explanation, case.test, case.negatives, key=case.feature.id.index)
    replies = backend.complete(prepared.requests)
    judged, _ = scorer.read(prepared, replies)
    return judged, scorer.judge(prepared, replies, backend.name)


def _same_marks(judged, shown, case):
    """Correct marks are the same text on both sides; wrong marks (random on each side) mark as many words."""
    activating = {e.text for e in case.test}
    mine = {plain(j.sample.text): j.sample.text for j in judged}
    for text in shown:
        if plain(text) in activating:
            assert text == mine[plain(text)]
        else:
            assert _marked_words(text) == _marked_words(mine[plain(text)])


def _marked_words(text: str) -> int:
    return sum(len(span.split()) for span in re.findall(r"<<(.*?)>>", text))


def test_a_short_last_prompt_is_read_here_and_lost_in_delphi(delphi):
    """The one deliberate difference in reading: 16 examples, 5 per prompt, leave a last prompt of 1; delphi
    expects 5 entries from it and reads none, this package expects 1."""
    for (case, scorer_name, _, answers, _, _), theirs in _classifier_runs(delphi, "drawn-short-last"):
        scorer = SCORERS[scorer_name](per_prompt=5, probabilities=False)
        judged, _ = _ours(scorer, case, answers)
        assert sum(s["prediction"] is None for s in theirs["samples"]) == 1
        assert sum(j.prediction is None for j in judged) == 0


def test_embedding_matches_delphi_with_sentence_transformers(delphi):
    embedder = SentenceEmbedder(interp.load("minilm-l6"))
    runs = [(run, out) for run, out in delphi if run[1] == "embedding"]
    assert len(runs) == 6
    for (case, *_), theirs in runs:
        assert theirs["query"].endswith(case.explanation)
        prefix = theirs["query"][: -len(case.explanation)]
        ours = EmbeddingScorer(embedder, query=prefix + "{explanation}").score(
            case.explanation, case.test, case.negatives
        )
        texts = [e.text for e in case.test] + [e.text for e in case.negatives]
        # float32 unit vectors of 384 components from two implementations of the same encoder: cosines agree to
        # about 1e-7 per component summed, well inside 1e-5
        assert list(ours.similarities) == pytest.approx([theirs["similarity"][t] for t in texts], abs=1e-5)
        positives = [theirs["similarity"][e.text] for e in case.test]
        negatives = [theirs["similarity"][e.text] for e in case.negatives]
        assert auc(positives, negatives) == pytest.approx(
            theirs["auc"], abs=1e-12
        )  # scikit-learn's roc_auc_score
        assert abs(ours.auc - theirs["auc"]) <= 1 / (len(positives) * len(negatives)) + 1e-12


def test_metric_functions_match_delphi(delphi):
    ((truth, predictions, probabilities), *_), theirs = next((r, o) for r, o in delphi if r[1] == "metrics")
    m = classifier_metrics(truth, predictions, probabilities, list(range(len(truth))))
    assert (m.accuracy, m.precision, m.recall, m.f1, m.auc) == pytest.approx(
        (theirs["accuracy"], theirs["precision"], theirs["recall"], theirs["f1_score"], theirs["auc"]),
        abs=1e-12,
    )
