"""The one metric type: the batch a metric sees, the ready-made logit difference, and the signature check."""

from __future__ import annotations

import functools

import pytest
import torch

from interp.analysis import Batch, logit_difference
from interp.analysis.metric import check_signature, mean_metric
from interp.circuits import Pairs


def test_a_batch_reads_the_last_real_token_or_its_positions_from_any_logits_shape():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    batch = Batch(torch.arange(6).view(2, 3), mask, labels={"answer": torch.tensor([1, 2])})
    assert len(batch) == 2 and batch.n_pos == 3 and batch.read_positions().tolist() == [1, 2]
    logits = torch.arange(2 * 3 * 4, dtype=torch.float).view(2, 3, 4)
    assert batch.final_logits(logits).tolist() == [logits[0, 1].tolist(), logits[1, 2].tolist()]
    assert batch.final_logits(logits[:, 0]).tolist() == logits[:, 0].tolist()  # one position per row already
    with pytest.raises(ValueError, match="label 'answer' has shape \\[3\\]"):
        Batch(torch.zeros(2, 3, dtype=torch.long), labels={"answer": torch.tensor([1, 2, 3])})
    with pytest.raises(ValueError, match="no rows"):
        Batch(torch.zeros(0, 3, dtype=torch.long))


def test_pairs_are_a_batch_of_their_clean_inputs_so_one_metric_serves_both():
    ids = torch.tensor([[1, 2], [3, 4]])
    labels = {"answer": torch.tensor([2, 0]), "foil": torch.tensor([0, 2])}
    pairs = Pairs(clean=ids, corrupt=ids.flip(0), labels=labels)
    assert isinstance(pairs, Batch) and torch.equal(pairs.tokens, pairs.clean)
    logits = torch.randn(2, 2, 3)
    torch.testing.assert_close(
        logit_difference(logits, pairs), logit_difference(logits, Batch(ids, labels=labels))
    )
    assert mean_metric(logit_difference, logits, pairs, "here").ndim == 0


def test_the_signature_check_refuses_a_one_argument_metric_and_accepts_the_rest():
    def old(logits):
        return logits.mean()

    with pytest.raises(
        TypeError, match=r"the metric old\(logits\) cannot be called as metric\(logits, batch\)"
    ):
        check_signature(old)
    with pytest.raises(TypeError, match="metric is a int"):
        check_signature(3)

    class Scaled:
        def __call__(self, logits, batch, scale=2.0):
            return scale * logits[:, -1, 0]

    for metric in (logit_difference, Scaled(), functools.partial(lambda k, logits, batch: logits, 0), max):
        check_signature(metric)
