"""Detection and fuzzing: can a scorer model, told the explanation, tell where the feature is?

Both follow delphi's definitions (eai-delphi 0.1.3, ``scorers/classifier``):

- **detection**: the activating test examples are mixed with non-activating ones, shown as plain text, and the
  scorer answers for each whether the feature is present;
- **fuzzing**: every example is shown with some tokens marked: an activating example at its tokens that reach
  ``threshold`` (0.3) times its largest activation (correctly marked), a non-activating one at ``n`` tokens
  drawn at random, where ``n`` is the mean number of active tokens per activating example, rounded up
  (wrongly marked); the scorer answers for each whether every marked token fits the explanation.

The examples are shuffled (seeded), cut into prompts of ``per_prompt`` examples (delphi's default is 5), and
each prompt's answer is read as a Python list with one 0 or 1 per example: the first ``[...]`` within a line.
An answer that does not hold such a list leaves its prompt's examples unread: they are counted as failed and
left out of the metrics, as delphi leaves them out. With ``probabilities``, the likeliest tokens at each step of
a readable answer give each example a probability of "1" (see
:func:`~interp.sae.explanations.chat.binary_probabilities`), from which the AUC is computed. Where no answer
about an activating example, or none about a non-activating one, could be read, there is nothing to compute
the metrics from: the score is a :class:`~interp.sae.explanations.failure.Failure` that says so (delphi reports
0 for each metric then).

Where this differs from delphi, deliberately: a prompt's list must have one entry per example *in that prompt*
(delphi expects ``per_prompt`` entries even from a last, shorter prompt, so it can never read one); entries must
be numbers or booleans (delphi reads any non-empty string, ``"0"`` included, as 1); probabilities that cannot be
read leave the answers themselves read (delphi then drops the answers too).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp.sae.explanations.chat import ChatReply, ChatRequest, binary_probabilities
from interp.sae.explanations.failure import Failure
from interp.sae.explanations.metrics import CHANCE, ClassifierMetrics, classifier_metrics
from interp.sae.explanations.prompts import one_line, request
from interp.sae.explanations.records import Example
from interp.sae.explanations.scorer import Scorer

_LIST = re.compile(r"\[.*?\]")  # within one line, as delphi reads it
TOP_LOGPROBS = 5


@dataclass(frozen=True)
class Sample:
    """An example as the scorer sees it (``text``, marked for fuzzing) and the truth about it."""

    text: str
    activating: bool
    quantile: int | None


@dataclass(frozen=True)
class Judged:
    """A sample, the scorer's answer for it (``None``: unread), its probability, and its prompt's number."""

    sample: Sample
    prediction: bool | None
    probability: float | None
    prompt: int


@dataclass(frozen=True)
class ClassifierTask:
    """A feature's samples cut into prompts, and the requests that ask about them."""

    batches: tuple[tuple[Sample, ...], ...]
    requests: tuple[ChatRequest, ...]


@dataclass(frozen=True)
class ClassifierScore:
    """One scorer's verdict on one explanation."""

    scorer: str
    metrics: ClassifierMetrics
    judged: tuple[Judged, ...]
    prompts: tuple[str, ...]
    model: str
    failures: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            **self.metrics.to_json(),
            "model": self.model,
            "prompts": list(self.prompts),
            "failures": list(self.failures),
        }


class ClassifierScorer(Scorer):
    """What detection and fuzzing share: prompts of several examples, answers read as lists of 0s and 1s.

    Args:
        per_prompt: examples shown in one prompt.
        threshold: fuzzing marks an activating example's tokens from this fraction of its largest activation.
        probabilities: ask for the likeliest tokens at each step, for the AUC.
        seed: the order of the examples (and, for fuzzing, the wrongly marked tokens).
    """

    name = ""

    def __init__(
        self, per_prompt: int = 5, threshold: float = 0.3, probabilities: bool = True, seed: int = 42
    ) -> None:
        if per_prompt < 1:
            raise ValueError(f"per_prompt={per_prompt}; show at least 1 example per prompt")
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold={threshold}; give a fraction in (0, 1]")
        self.per_prompt = per_prompt
        self.threshold = threshold
        self.probabilities = probabilities
        self.seed = seed

    def samples(
        self, test: Sequence[Example], negatives: Sequence[Example], rng: random.Random
    ) -> list[Sample]:
        raise NotImplementedError

    def prepare(
        self, explanation: str, test: Sequence[Example], negatives: Sequence[Example], key: Any = 0
    ) -> ClassifierTask:
        """Shuffle the samples, cut them into prompts, and write the requests; ``key`` (a feature's number)
        joins the seed, so that features do not share one order."""
        if not test or not negatives:
            raise ValueError(
                f"the {self.name} score needs both kinds of example; got {len(test)} and {len(negatives)}"
            )
        rng = random.Random(f"{self.seed}:{key}")
        samples = self.samples(test, negatives, rng)
        rng.shuffle(samples)
        batches = tuple(
            tuple(samples[i : i + self.per_prompt]) for i in range(0, len(samples), self.per_prompt)
        )
        top = TOP_LOGPROBS if self.probabilities else 0
        requests = tuple(
            request(
                self.name,
                max_tokens=3 * len(batch) + 4,
                top_logprobs=top,
                explanation=one_line(explanation),
                examples="\n".join(f"Passage {i}: {one_line(s.text)}" for i, s in enumerate(batch)),
            )
            for batch in batches
        )
        return ClassifierTask(batches, requests)

    def read(
        self, prepared: ClassifierTask, replies: Sequence[ChatReply | Failure]
    ) -> tuple[tuple[Judged, ...], tuple[str, ...]]:
        """Each sample with the answer read for it (``None`` where its prompt's answer could not be read), and
        why each unread prompt was not read."""
        judged, failures = [], []
        for number, (batch, reply) in enumerate(zip(prepared.batches, replies, strict=True)):
            answers: list[bool] | None = None
            probabilities: list[float] | None = None
            if isinstance(reply, Failure):
                failures.append(reply.reason)
            else:
                answers = read_answer(reply.text, len(batch))
                if answers is None:
                    failures.append(f"unreadable answer {reply.text[:80]!r}")
                if answers is not None and reply.tokens is not None:
                    found = binary_probabilities(reply.tokens)
                    probabilities = found if len(found) == len(batch) else None
            for i, sample in enumerate(batch):
                judged.append(
                    Judged(
                        sample,
                        None if answers is None else answers[i],
                        None if probabilities is None else probabilities[i],
                        number,
                    )
                )
        return tuple(judged), tuple(failures)

    def judge(
        self, prepared: ClassifierTask, replies: Sequence[ChatReply | Failure], model: str | None
    ) -> ClassifierScore | Failure:
        """Read each prompt's answer and compute the metrics; a :class:`Failure` where no answer about one kind
        of example (or about either) could be read."""
        if model is None:
            raise ValueError(f"the {self.name} score's answers come from a language model; give its name")
        judged, failures = self.read(prepared, replies)
        hashes = tuple(r.key(model) for r in prepared.requests)
        read = [j for j in judged if j.prediction is not None]
        positive = sum(j.sample.activating for j in read)
        negative = len(read) - positive
        if not positive or not negative:
            return Failure(
                _unread(positive, negative, failures),
                {
                    "chance": CHANCE,
                    "n_positive": positive,
                    "n_negative": negative,
                    "n_failed": len(judged) - len(read),
                    "model": model,
                    "prompts": list(hashes),
                    "failures": list(failures),
                },
            )
        metrics = classifier_metrics(
            [j.sample.activating for j in judged],
            [j.prediction for j in judged],
            [j.probability for j in judged],
            [j.prompt for j in judged],
            seed=self.seed,
        )
        return ClassifierScore(self.name, metrics, judged, hashes, model, failures)


def _unread(positive: int, negative: int, failures: Sequence[str]) -> str:
    why = "; ".join(failures[:2])
    if not positive and not negative:
        return f"no answer could be read ({why})"
    kind = "a non-activating" if positive else "an activating"
    return (
        f"no answer about {kind} example could be read ({why}); read {positive} about activating and {negative} "
        "about non-activating ones, and the metrics need both"
    )


class DetectionScorer(ClassifierScorer):
    """Detection: activating and non-activating examples as plain text; is the feature present?"""

    name = "detection"

    def samples(
        self, test: Sequence[Example], negatives: Sequence[Example], rng: random.Random
    ) -> list[Sample]:
        return [Sample(e.text, False, None) for e in negatives] + [
            Sample(e.text, True, e.quantile) for e in test
        ]


class FuzzingScorer(ClassifierScorer):
    """Fuzzing: correctly marked activating examples against randomly marked non-activating ones."""

    name = "fuzzing"

    def samples(
        self, test: Sequence[Example], negatives: Sequence[Example], rng: random.Random
    ) -> list[Sample]:
        n_marked = wrong_marks(test)
        wrong = []
        for example in negatives:
            top = example.max_activation
            below = [i for i, a in enumerate(example.activations) if a <= self.threshold * top]
            chosen = set(rng.sample(below, min(n_marked, len(below))))
            wrong.append(
                Sample(example.marked([i in chosen for i in range(len(example.tokens))]), False, None)
            )
        right = [Sample(e.marked(e.strong(self.threshold)), True, e.quantile) for e in test]
        return wrong + right


def wrong_marks(test: Sequence[Example]) -> int:
    """How many tokens a wrongly marked example gets: the mean number of tokens where the feature is not zero
    in the activating examples, rounded up."""
    if not test:
        return 0
    return math.ceil(sum(sum(a != 0 for a in e.activations) for e in test) / len(test))


def read_answer(text: str, n: int) -> list[bool] | None:
    """The first ``[...]`` in ``text`` read as ``n`` answers (numbers or booleans, non-zero meaning yes), or
    ``None`` if it is not such a list.

    >>> read_answer("Sure: [1, 0, 1]", 3), read_answer("[1, 0]", 3), read_answer("no list", 1)
    ([True, False, True], None, None)
    """
    match = _LIST.search(text)
    if match is None:
        return None
    try:
        values = json.loads(match[0])
    except json.JSONDecodeError:
        return None
    if len(values) != n or not all(isinstance(v, (int, float)) for v in values):
        return None
    return [bool(v) for v in values]
