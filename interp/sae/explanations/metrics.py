"""The numbers a score reports, as delphi defines them, with their chance levels and intervals.

A classifier score (detection, fuzzing) counts, over the examples whose answer could be read, true and false
positives and negatives with "activating" as the positive class, and reports:

- ``accuracy``: the *balanced* accuracy, (true-positive rate + true-negative rate) / 2, which is what delphi
  calls accuracy; its chance level is 0.5 whatever the share of activating examples;
- ``precision`` (0 when nothing was called activating), ``recall``, ``f1`` (0 when both are 0); a scorer that
  answers at random calls activating a share r of examples and has expected precision equal to the share of
  activating examples (0.5 when the classes are balanced, as here) and recall r;
- ``auc``: the area under the ROC curve of the probability the scorer gave to "1", where the backend returns
  probabilities (chance 0.5);
- ``interval``: a 95% percentile bootstrap interval of the balanced accuracy, resampling whole prompts (the
  examples one prompt shows are judged together, so they are not independent).

These numbers are computed only from answers about both kinds of example: with none about one kind, the
balanced accuracy would count its rate as 0 though nothing was measured, so :func:`classifier_metrics` refuses,
and the scorers report such a score as missing, with the reason (:class:`~interp.sae.explanations.failure.Failure`).

The embedding score is the AUC of the explanation's similarity to activating against non-activating examples
(chance 0.5), with a bootstrap interval that resamples the two classes separately. Both intervals are
:mod:`interp.analysis.stats`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from interp.analysis.stats import bootstrap_interval, bootstrap_mean_interval

N_BOOT = 1000
CHANCE = 0.5


@dataclass(frozen=True)
class ClassifierMetrics:
    """A classifier score's numbers (see the module's description)."""

    accuracy: float
    precision: float
    recall: float
    f1: float
    auc: float | None
    interval: tuple[float, float]
    n_positive: int
    n_negative: int
    n_failed: int
    chance: float = CHANCE

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "interval": list(self.interval)}


def classifier_metrics(
    truth: Sequence[bool],
    predictions: Sequence[bool | None],
    probabilities: Sequence[float | None],
    groups: Sequence[int],
    seed: int = 0,
) -> ClassifierMetrics:
    """The metrics of one feature's judged examples.

    Args:
        truth: whether each example is activating.
        predictions: the scorer's answer for each, ``None`` where it could not be read (left out).
        probabilities: the scorer's probability of "activating" for each, ``None`` where there is none.
        groups: the prompt each example was shown in (the bootstrap resamples prompts).
        seed: the bootstrap's seed.

    Raises:
        ValueError: no prediction about an activating example, or none about a non-activating one, was read.
    """
    read = [i for i, p in enumerate(predictions) if p is not None]
    t = np.array([truth[i] for i in read], dtype=bool)
    p = np.array([predictions[i] for i in read], dtype=bool)
    pos, neg = int(t.sum()), int((~t).sum())
    if not pos or not neg:
        raise ValueError(
            f"the metrics need answers about both kinds of example; {pos} about activating and {neg} about "
            "non-activating ones were read"
        )
    tp, tn = int((p & t).sum()), int((~p & ~t).sum())
    fp = int((p & ~t).sum())
    tpr, tnr = tp / pos, tn / neg
    precision = tp / (tp + fp) if tp + fp else 0.0
    f1 = 2 * precision * tpr / (precision + tpr) if precision + tpr else 0.0
    # Balanced accuracy is the mean of correct / (2 * the example's class count) * n: resampling prompts resamples
    # that mean.
    weight = np.where(t, len(t) / (2 * pos), len(t) / (2 * neg))
    values = weight * (p == t)
    _, low, high = bootstrap_mean_interval(values, N_BOOT, seed, groups=[groups[i] for i in read])
    scored = [(truth[i], probabilities[i]) for i in range(len(truth)) if probabilities[i] is not None]
    area = None
    if scored and len({s for s, _ in scored}) == 2:
        area = auc([v for s, v in scored if s], [v for s, v in scored if not s])
    return ClassifierMetrics(
        accuracy=(tpr + tnr) / 2,
        precision=precision,
        recall=tpr,
        f1=f1,
        auc=area,
        interval=(low, high),
        n_positive=pos,
        n_negative=neg,
        n_failed=len(truth) - len(read),
    )


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The probability that a random positive scores above a random negative, ties counting half (the area
    under the ROC curve, the Mann-Whitney statistic over the number of pairs).

    >>> auc([0.9, 0.8], [0.1, 0.8])
    0.875
    """
    pos, neg = np.asarray(positive, dtype=np.float64), np.asarray(negative, dtype=np.float64)
    if not len(pos) or not len(neg):
        raise ValueError(f"AUC needs both classes; got {len(pos)} positive and {len(neg)} negative scores")
    above = (pos[:, None] > neg[None, :]).sum()  # pairs [positive, negative]
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((above + 0.5 * ties) / (len(pos) * len(neg)))


def auc_interval(
    positive: Sequence[float], negative: Sequence[float], seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """A percentile bootstrap interval of :func:`auc`, resampling positives and negatives separately
    (:func:`interp.analysis.stats.bootstrap_interval`); ``None`` where a class holds fewer than two scores."""
    found = bootstrap_interval([positive, negative], auc, N_BOOT, seed, level)
    return None if found is None else found[1:]
