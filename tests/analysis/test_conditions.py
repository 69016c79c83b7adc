"""Several conditions in one forward pass give what each gives alone."""

from __future__ import annotations

import doctest

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from interp.analysis import conditions
from interp.analysis.conditions import run_conditions


def _model() -> HookedTransformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(n_layers=2, d_model=16, n_heads=2, d_vocab=20, n_ctx=8)
    return HookedTransformer(cfg).eval()


def test_each_copy_gets_its_own_edit_and_its_own_logits():
    model = _model()
    tokens = torch.randint(0, 20, (3, 5))
    name = "blocks.0.hook_resid_mid"
    scales = torch.tensor([0.0, 1.0, -2.0])

    def scale(acts, hook):  # acts: [copy, batch, pos, d_model]
        return acts * (1 + scales[:, None, None, None])

    parts = run_conditions(model, tokens, [(name, scale)], copies=3)
    for k, part in enumerate(parts):
        alone = model.run_with_hooks(tokens, fwd_hooks=[(name, lambda x, hook, k=k: x * (1 + scales[k]))])
        torch.testing.assert_close(part, alone)
    mixed = run_conditions(model, [tokens, tokens.flip(0)], [])
    torch.testing.assert_close(mixed[1], model(tokens.flip(0)))


def test_bad_counts_are_named():
    model, tokens = _model(), torch.zeros((1, 3), dtype=torch.long)
    with pytest.raises(ValueError, match=r"copies=None; give the number of conditions"):
        run_conditions(model, tokens, [])
    with pytest.raises(ValueError, match=r"copies=3 but 2 token tensors were given"):
        run_conditions(model, [tokens, tokens], [], copies=3)


def test_docstring_example():
    result = doctest.testmod(conditions)
    assert result.attempted > 0 and result.failed == 0
