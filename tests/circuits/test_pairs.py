"""Pairs: checks on construction, batching that trims padding, the read positions, and the metric checks."""

import pytest
import torch

from interp.circuits import Pairs, logit_difference
from interp.circuits.pairs import check_metric


def test_construction_checks():
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(TypeError, match="integer tensor"):
        Pairs(clean=ids.float(), corrupt=ids)
    with pytest.raises(ValueError, match="attention_mask has shape \\[2, 2\\]"):
        Pairs(clean=ids, corrupt=ids, attention_mask=torch.ones(2, 2))
    with pytest.raises(ValueError, match="only 0 \\(padding\\) and 1"):
        Pairs(clean=ids, corrupt=ids, attention_mask=torch.full((2, 3), 2))
    with pytest.raises(ValueError, match="positions has 1 entries"):
        Pairs(clean=ids, corrupt=ids, positions=torch.tensor([2]))
    with pytest.raises(IndexError, match="outside 0..2"):
        Pairs(clean=ids, corrupt=ids, positions=torch.tensor([2, 3]))
    with pytest.raises(ValueError, match="padding position"):
        Pairs(
            clean=ids,
            corrupt=ids,
            attention_mask=torch.tensor([[1, 1, 0], [1, 1, 1]]),
            positions=torch.tensor([2, 2]),
        )
    with pytest.raises(ValueError, match="label 'answer' has shape \\[3\\]"):
        Pairs(clean=ids, corrupt=ids, labels={"answer": torch.tensor([1, 2, 3])})
    with pytest.raises(ValueError, match="no pairs"):
        Pairs(clean=ids[:0], corrupt=ids[:0])


def test_batches_trim_trailing_padding_and_read_the_last_real_token():
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]])
    ids = torch.arange(12).view(3, 4)
    pairs = Pairs(clean=ids, corrupt=ids + 1, attention_mask=mask, labels={"answer": torch.tensor([0, 1, 2])})
    assert pairs.batches(2) == [range(0, 2), range(2, 3)]
    first = pairs[0:2]
    assert first.n_pos == 3 and first.labels["answer"].tolist() == [0, 1]
    assert first.read_positions().tolist() == [1, 2]
    assert pairs[[2]].n_pos == 4
    logits = torch.arange(3 * 4 * 5, dtype=torch.float).view(3, 4, 5)
    assert pairs.final_logits(logits).tolist() == [
        logits[0, 1].tolist(),
        logits[1, 2].tolist(),
        logits[2, 3].tolist(),
    ]
    with pytest.raises(ValueError, match="batch_size=0"):
        pairs.batches(0)
    left = Pairs(clean=ids, corrupt=ids, attention_mask=mask.flip(1))  # left padding: the last token is real
    assert left.read_positions().tolist() == [3, 3, 3] and left[0:2].n_pos == 4


def test_logit_difference_and_metric_checks():
    pairs = Pairs(
        clean=torch.tensor([[1, 2]]),
        corrupt=torch.tensor([[1, 3]]),
        labels={"answer": torch.tensor([2]), "foil": torch.tensor([0])},
    )
    logits = torch.tensor([[[0.0, 0, 0], [1.0, 0, 5]]])
    assert logit_difference(logits, pairs).tolist() == [4.0]
    with pytest.raises(KeyError, match="needs the label 'answer'"):
        logit_difference(logits, Pairs(clean=pairs.clean, corrupt=pairs.corrupt))
    with pytest.raises(ValueError, match="returned shape \\[\\] on x.*a mean over the batch"):
        check_metric(torch.tensor(1.0), pairs, "on x")
    with pytest.raises(TypeError, match="returned float"):
        check_metric(1.0, pairs, "on x")
    with pytest.raises(ValueError, match="NaN"):
        check_metric(torch.tensor([float("nan")]), pairs, "on x")
