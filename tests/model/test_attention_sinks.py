"""Attention sinks (GPT-OSS) against a softmax written here: each head's sink is one more key in every row.

The pattern is the softmax over the row's scores and the head's sink logit, the sink's own share dropped, so a
row sums to one minus that share; a sink far below every score changes no pattern; and the heads' mixtures of
values are the pattern times the values, the sink adding nothing.
"""

from __future__ import annotations

import torch

from interp import HookedTransformer
from tests.model.variants import FAMILY_VARIANTS, tiny_config


def _model(**fields):
    cfg = tiny_config(**{**FAMILY_VARIANTS["gpt_oss"], **fields})
    model = HookedTransformer(cfg)
    with torch.no_grad():
        for block in model.blocks:
            if block.attn.sinks is not None:
                block.attn.sinks.copy_(torch.tensor([-1.0, 0.0, 1.0, 2.5]))
    return model


def test_the_pattern_is_the_softmax_with_the_sink_as_one_more_key():
    model = _model()
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 7), generator=torch.Generator().manual_seed(0))
    names = ["blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_pattern", "blocks.0.attn.hook_v"]
    names.append("blocks.0.attn.hook_z")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=names)
    scores = cache["blocks.0.attn.hook_attn_scores"].double()  # [batch, head, query, key], masked: -inf
    sinks = model.blocks[0].attn.sinks.detach().double()
    sink_column = sinks.view(1, -1, 1, 1).expand(*scores.shape[:3], 1)
    full = torch.cat([scores, sink_column], -1).softmax(-1)  # [batch, head, query, key + 1]
    pattern = cache["blocks.0.attn.hook_pattern"]
    torch.testing.assert_close(pattern.double(), full[..., :-1], atol=1e-6, rtol=0)
    torch.testing.assert_close(pattern.sum(-1).double(), 1 - full[..., -1], atol=1e-6, rtol=0)
    assert (full[..., -1] > 0.01).all()  # every row gives the sink a share
    v = cache["blocks.0.attn.hook_v"].repeat_interleave(model.cfg.group_size, dim=2)  # [batch, key, head, e]
    z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)
    torch.testing.assert_close(cache["blocks.0.attn.hook_z"], z, atol=1e-5, rtol=1e-5)


def test_a_sink_far_below_every_score_changes_no_pattern():
    with_sinks, without = _model(), _model(attn_sinks=False)
    state = with_sinks.state_dict()
    for layer in range(with_sinks.cfg.n_layers):
        state[f"blocks.{layer}.attn.sinks"] = torch.full((with_sinks.cfg.n_heads,), -1e4)
    with_sinks.load_state_dict(state)
    without.load_state_dict({k: v for k, v in state.items() if not k.endswith(".sinks")})
    tokens = torch.randint(0, with_sinks.cfg.d_vocab, (2, 7), generator=torch.Generator().manual_seed(1))
    patterns = "blocks.*.attn.hook_pattern"
    with torch.no_grad():
        _, ours = with_sinks.run_with_cache(tokens, names_filter=patterns)
        _, plain = without.run_with_cache(tokens, names_filter=patterns)
    for layer in range(with_sinks.cfg.n_layers):  # probabilities: float32 rounds them by ~1e-7 a step
        torch.testing.assert_close(ours["pattern", layer], plain["pattern", layer], atol=1e-6, rtol=0)
