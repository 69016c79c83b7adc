"""The residual study on small random stacks."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from studies.residual.config import ResidualConfig
from studies.residual.stacks import cut_skip_hooks, gradient_table, stream_sum_error


@pytest.fixture(scope="module")
def grads():
    cfg = ResidualConfig(depths=(6, 48), seeds=2, d_model=16, seq_len=8, batch=2)
    return gradient_table(cfg, seed=0).set_index(["setting", "depth"])


def test_gradient_survives_depth_with_residual(grads):
    for setting in ("pre-norm, residual", "post-norm, residual", "no norm, residual"):
        assert abs(grads.loc[(setting, 48)].log10_ratio_first_to_last) < 3, setting
        assert grads.loc[(setting, 48)].final_token_diversity > 0.3, setting


def test_gradient_collapses_without_residual_or_norm(grads):
    with_skip = grads.loc[("no norm, residual", 48)].log10_grad_first
    without = grads.loc[("no norm, no residual", 48)].log10_grad_first
    assert with_skip - without > 30  # more than 30 orders of magnitude
    assert grads.loc[("no norm, no residual", 6)].log10_grad_first < with_skip - 10


def test_norms_keep_gradient_size_but_signal_collapses(grads):
    row = grads.loc[("pre-norm, no residual", 48)]
    assert row.log10_grad_first > -4
    assert row.final_token_diversity < 1e-6


def test_cut_skip_hooks_remove_the_identity():
    cfg = TransformerConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=20, n_ctx=6, seed=0)
    model = HookedTransformer(cfg).double()
    tokens = torch.randint(0, 20, (1, 6))
    _, cache = model.run_with_cache(tokens, fwd_hooks=cut_skip_hooks())
    torch.testing.assert_close(cache["resid_mid", 0], cache["attn_out", 0] + cache["resid_pre", 0])
    _, plain = model.run_with_cache(tokens)
    # With the cut, resid_mid is the attention output alone.
    torch.testing.assert_close(cache["resid_mid", 0], plain["attn_out", 0])


def test_stream_is_sum_of_writes():
    cfg = TransformerConfig(n_layers=3, d_model=32, n_heads=4, d_vocab=50, n_ctx=8, seed=1)
    model = HookedTransformer(cfg)
    error = stream_sum_error(model, torch.randint(0, 50, (2, 8)))
    assert error < 1e-5
    with pytest.raises(ValueError, match="pre-norm"):
        stream_sum_error(HookedTransformer(cfg.replace(norm_placement="post")), torch.zeros(1, 4).long())
