"""Detection and fuzzing on planted features, with a scorer that answers by rule, and their metrics.

A planted feature fires exactly on one class of words. Told the true explanation, the rule scorer is right about
every example, so every score is exactly 1. Told another feature's explanation (a shuffled one), it answers
by words that are spread over activating and non-activating examples alike: its answers are independent of the
truth, the balanced accuracy's chance level is 0.5, and its 95% interval (prompts resampled) must hold 0.5.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import scipy.stats

from interp.sae.explanations import DetectionScorer, Example, FeatureFiles, FuzzingScorer
from interp.sae.explanations.chat import ChatReply, TokenChoice, binary_probabilities
from interp.sae.explanations.classifier import read_answer, wrong_marks
from interp.sae.explanations.failure import Failure
from interp.sae.explanations.metrics import auc, auc_interval, classifier_metrics
from tests.sae.explanations.planted import PLANTED, write_folder
from tests.sae.explanations.rule_model import RuleModel

N_TEST = 30


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    folder = FeatureFiles.open(write_folder(tmp_path_factory.mktemp("planted"), n_examples=80))
    found = {}
    for planted in PLANTED:
        record = folder.record(planted.id)
        _, test = record.split(10, N_TEST, seed=0)
        test = [e.window(32) for e in test]
        found[planted.kind] = (test, record.negatives(len(test), 32, seed=0))
    return found


@pytest.mark.parametrize("scorer", [DetectionScorer, FuzzingScorer])
@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: p.kind)
def test_the_true_explanation_scores_one(examples, scorer, planted):
    test, negatives = examples[planted.kind]
    assert len(test) == len(negatives) == N_TEST
    score = scorer(per_prompt=5).score(
        planted.explanation, test, negatives, backend=RuleModel(), key=planted.id.index
    )
    m = score.metrics
    assert (m.accuracy, m.precision, m.recall, m.f1, m.auc) == (1.0, 1.0, 1.0, 1.0, 1.0)
    assert m.interval == (1.0, 1.0) and (m.n_positive, m.n_negative, m.n_failed) == (N_TEST, N_TEST, 0)
    assert len(score.prompts) == 2 * N_TEST // 5 and score.model == "rule-model"


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: p.kind)
def test_a_shuffled_explanation_detects_at_chance(examples, planted):
    test, negatives = examples[planted.kind]
    for other in PLANTED:
        if other is planted:
            continue
        m = (
            DetectionScorer(per_prompt=5)
            .score(other.explanation, test, negatives, backend=RuleModel())
            .metrics
        )
        assert m.chance == 0.5
        assert m.interval[0] < 0.5 < m.interval[1], (other.kind, m)
        assert 0.3 < m.accuracy < 0.7


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: p.kind)
def test_a_shuffled_explanation_fuzzes_at_chance_exactly(examples, planted):
    """Correct marks sit on the feature's own class, which the other explanation rejects, and wrong marks fall on
    filler words (or the other class, by chance): the scorer says 0 to every example, TPR 0 and TNR 1."""
    test, negatives = examples[planted.kind]
    other = PLANTED[(PLANTED.index(planted) + 1) % len(PLANTED)]
    m = FuzzingScorer(per_prompt=5).score(other.explanation, test, negatives, backend=RuleModel()).metrics
    assert (m.accuracy, m.recall, m.precision, m.f1) == (0.5, 0.0, 0.0, 0.0)


def test_fuzzing_marks(examples):
    test, negatives = examples["digits"]
    scorer = FuzzingScorer(per_prompt=5)
    prepared = scorer.prepare("numbers written in digits", test, negatives, key=1)
    samples = [s for batch in prepared.batches for s in batch]
    n_wrong = math.ceil(sum(sum(a > 0 for a in e.activations) for e in test) / len(test))
    assert wrong_marks(test) == n_wrong
    for sample in samples:
        marked = sample.text.count("<<")
        if sample.activating:
            assert sample.text in {e.marked(e.strong(0.3)) for e in test}
        else:  # n_wrong tokens marked, in runs: at most n_wrong runs
            tokens = [w for span in sample.text.split("<<")[1:] for w in span.split(">>")[0].split(" ") if w]
            assert 1 <= marked <= n_wrong and len(tokens) == n_wrong
    assert sorted(s.activating for s in samples) == [False] * N_TEST + [True] * N_TEST
    again = scorer.prepare("numbers written in digits", test, negatives, key=1)
    assert (
        again == prepared and scorer.prepare("numbers written in digits", test, negatives, key=2) != prepared
    )


def test_unreadable_answers_are_counted_and_left_out():
    test = [Example((" 7",), (1.0,), 0) for _ in range(4)]
    negatives = [Example((" a",), (0.0,)) for _ in range(4)]
    scorer = DetectionScorer(per_prompt=2, probabilities=False)
    prepared = scorer.prepare("digits", test, negatives)
    replies = [ChatReply(_truth(b), "m") for b in prepared.batches]
    replies[0] = ChatReply("I think so", "m")
    replies[1] = Failure("timed out")
    score = scorer.judge(prepared, replies, "m")
    assert (
        score.metrics.n_failed == 4
        and score.metrics.accuracy == 1.0
        and score.failures
        == (
            "unreadable answer 'I think so'",
            "timed out",
        )
    )
    assert score.metrics.n_positive + score.metrics.n_negative == 4


def _truth(batch) -> str:
    return "[" + ", ".join(str(int(s.activating)) for s in batch) + "]"


def test_read_answer():
    assert read_answer("[1,0,1]", 3) == [True, False, True]
    assert read_answer("Answer: [true, false] and [0, 0]", 2) == [True, False]
    assert read_answer("[1, 0, 1]", 2) is None  # one entry per example in the prompt
    assert read_answer('["1", "0"]', 2) is None  # strings are not answers
    assert read_answer("[1, 0", 2) is None and read_answer("", 1) is None


def test_binary_probabilities():
    steps = [
        TokenChoice("[", (("[", 0.0),)),
        TokenChoice("1", (("1", math.log(0.6)), ("0", math.log(0.3)), ("10", math.log(0.1)))),
        TokenChoice(",", ((",", 0.0),)),
        TokenChoice("0", (("a", 0.0),)),
    ]
    assert binary_probabilities(steps) == pytest.approx([0.6 / 1.0, 0.0])  # "10" holds a 0: it counts as 0


def test_metrics_by_hand():
    rng = random.Random(0)
    truth = [rng.random() < 0.4 for _ in range(50)]
    predictions = [None if rng.random() < 0.1 else rng.random() < 0.5 for _ in range(50)]
    probabilities = [None if p is None else rng.random() for p in predictions]
    m = classifier_metrics(truth, predictions, probabilities, list(range(50)))
    pairs = [(t, p) for t, p in zip(truth, predictions, strict=True) if p is not None]
    tp = sum(t and p for t, p in pairs)
    fp = sum(p and not t for t, p in pairs)
    tn = sum(not t and not p for t, p in pairs)
    pos, neg = sum(t for t, _ in pairs), sum(not t for t, _ in pairs)
    assert m.accuracy == pytest.approx((tp / pos + tn / neg) / 2)
    assert m.precision == pytest.approx(tp / (tp + fp)) and m.recall == pytest.approx(tp / pos)
    assert m.f1 == pytest.approx(2 * tp / (2 * tp + fp + (pos - tp)))
    scored = [(t, v) for t, v in zip(truth, probabilities, strict=True) if v is not None]
    u = scipy.stats.mannwhitneyu([v for t, v in scored if t], [v for t, v in scored if not t]).statistic
    assert m.auc == pytest.approx(u / (sum(t for t, _ in scored) * sum(not t for t, _ in scored)))
    assert (m.n_positive, m.n_negative, m.n_failed) == (pos, neg, 50 - len(pairs))
    assert m.interval[0] < m.accuracy < m.interval[1]


def test_auc_with_ties_and_its_interval():
    assert auc([1.0, 1.0], [1.0, 0.0]) == 0.75
    assert auc_interval([0.9] * 5, [0.1] * 5) == (1.0, 1.0)
    low, high = auc_interval(list(range(20)), [x + 0.5 for x in range(20)], seed=0)
    assert low < auc(list(range(20)), [x + 0.5 for x in range(20)]) < high
    with pytest.raises(ValueError, match="AUC needs both classes; got 0 positive and 2 negative scores"):
        auc([], [0.1, 0.2])


def test_the_auc_interval_is_scipys_two_sample_bootstrap():
    """The interval resamples the two classes apart, as ``scipy.stats.bootstrap`` does with two unpaired samples;
    a class of one score has no interval (one value says nothing of its spread)."""
    rng = random.Random(3)
    positive = [rng.gauss(1.0, 1.0) for _ in range(15)]
    negative = [rng.gauss(0.0, 1.0) for _ in range(12)]
    reference = scipy.stats.bootstrap(
        (positive, negative), auc, n_resamples=1000, vectorized=False, paired=False, method="percentile",
        rng=np.random.default_rng(7),
    ).confidence_interval  # fmt: skip
    assert auc_interval(positive, negative, seed=7) == pytest.approx(
        (reference.low, reference.high), abs=1e-12
    )
    assert auc_interval([0.9], negative) is None


def test_scores_from_nothing_are_missing_with_the_reason():
    """No readable answer, or none about one kind of example: no accuracy, precision, recall or f1 at all (not
    0.0), and the row says why, with what was asked."""
    test = [Example((" 7",), (1.0,), 0) for _ in range(4)]
    negatives = [Example((" a",), (0.0,)) for _ in range(4)]
    scorer = FuzzingScorer(per_prompt=2, probabilities=False)
    prepared = scorer.prepare("digits", test, negatives)
    nothing = scorer.judge(prepared, [ChatReply("no idea", "m")] * len(prepared.batches), "m")
    assert isinstance(nothing, Failure)
    assert (
        nothing.reason == "no answer could be read (unreadable answer 'no idea'; unreadable answer 'no idea')"
    )
    row = nothing.to_json()
    assert not {"accuracy", "precision", "recall", "f1", "auc"} & set(row)
    assert (row["n_positive"], row["n_negative"], row["n_failed"]) == (0, 0, 8)
    assert row["prompts"] == [r.key("m") for r in prepared.requests] and row["error"] == nothing.reason
    single = FuzzingScorer(per_prompt=1, probabilities=False)
    alone = single.prepare("digits", test, negatives)
    one_kind = [ChatReply("[1]" if b[0].activating else "unsure", "m") for b in alone.batches]
    partial = single.judge(alone, one_kind, "m")
    assert isinstance(partial, Failure) and partial.reason.startswith(
        "no answer about a non-activating example could be read (unreadable answer 'unsure'"
    )
    with pytest.raises(ValueError, match="need answers about both kinds of example; 0 about activating"):
        classifier_metrics([True, False], [None, False], [None, None], [0, 1])
