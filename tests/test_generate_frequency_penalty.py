"""The frequency penalty (TransformerLens's ``freq_penalty``): after the temperature, a token's score drops by
the penalty per occurrence in the row so far, prompt included, padding not."""

from __future__ import annotations

import pytest
import torch

from interp.generation.sampling import TokenChooser
from tests.generation_models import tiny_lm


def test_the_distribution_is_the_penalised_softmax():
    logits = torch.randn(2, 10, generator=torch.Generator().manual_seed(0))
    tokens = torch.tensor([[1, 1, 3, 7, 0], [4, 4, 4, 9, 9]])
    mask = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])  # row 0's first column is padding
    chooser = TokenChooser(
        do_sample=True, temperature=0.7, top_k=None, top_p=None, seed=0, batch=2, frequency_penalty=1.5
    )
    expected = []
    for row in range(2):
        scores = logits[row] / 0.7
        for token, real in zip(tokens[row].tolist(), mask[row].tolist(), strict=True):
            scores[token] -= 1.5 * real
        expected.append(scores.softmax(-1))
    torch.testing.assert_close(chooser.probabilities(logits, tokens, mask), torch.stack(expected))


def test_a_large_penalty_keeps_generation_from_repeating_a_token():
    model = tiny_lm()
    out = model.generate("The cat sat", 12, do_sample=True, seed=0, frequency_penalty=1e4)
    prompt = model.to_tokens("The cat sat").ids[0].tolist()
    seen = prompt + out.new_tokens[0]
    assert len(set(seen)) == len(seen)  # no token twice, prompt included
    assert (
        model.generate("The cat sat", 12, do_sample=True, seed=0, frequency_penalty=1e4).new_tokens
        == out.new_tokens
    )


def test_penalty_settings_that_cannot_apply_are_refused():
    model = tiny_lm()
    with pytest.raises(ValueError, match=r"frequency_penalty=1\.0 only apply when sampling"):
        model.generate("The cat", 3, frequency_penalty=1.0)
    with pytest.raises(ValueError, match=r"frequency_penalty=-1; give a finite number >= 0"):
        model.generate("The cat", 3, do_sample=True, frequency_penalty=-1)
