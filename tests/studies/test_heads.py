"""The heads study finds a planted previous-token head in a tiny random model."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from studies.heads.config import SCORES, HeadsConfig
from studies.heads.scores import positional_score, score_heads
from studies.heads.specialisation import coreference_holdout, specialisation


def planted_model(head: int = 1) -> HookedTransformer:
    """Layer 0, ``head`` attends from each position to the one before, through large orthogonal positions."""
    cfg = TransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_head=16, d_vocab=64, n_ctx=16, positional="learned", seed=0
    )
    model = HookedTransformer(cfg)
    gen = torch.Generator().manual_seed(0)
    basis = torch.cat([torch.ones(32, 1), torch.randn(32, 16, generator=gen)], dim=1)
    p = torch.linalg.qr(basis).Q[:, 1:].T  # [pos, d_model]: orthonormal, orthogonal to the ones vector
    attn = model.blocks[0].attn
    with torch.no_grad():
        model.pos_embed.W_pos.copy_(10 * p)
        attn.W_K[head].copy_(p.T)  # key j -> e_j (times sqrt(d_model) after the norm)
        w_q = torch.zeros(32, 16)
        w_q[:, :15] = 2 * p[1:].T  # query i -> 2 e_{i-1}
        attn.W_Q[head].copy_(w_q)
    return model.eval()


@pytest.fixture(scope="module")
def scores():
    cfg = HeadsConfig(seq_len=7, batch=4, token_low=0, token_high=64, models=())
    return score_heads(planted_model(), cfg, seed=0, coreference=False)


def test_planted_previous_token_head_is_found(scores):
    prev = scores["previous_token"]
    assert prev.shape == (2, 2)
    assert int(prev.argmax()) == 1  # layer 0, head 1
    assert prev[0, 1] > 0.9
    assert prev[0, 0] < 0.5


def test_planted_head_is_positional(scores):
    assert scores["positional"][0, 1] > 0.9
    assert scores["induction"][0, 1] < 0.2


def test_specialisation_numbers():
    a = torch.tensor([[1.0, 0.0], [0.5, 0.2]])
    scores = {name: a if i % 2 == 0 else -a for i, name in enumerate(SCORES)}
    spearman, jaccard, summary = specialisation(scores, top_k=1)
    assert spearman.loc["previous_token", "induction"] == pytest.approx(1.0)
    assert spearman.loc["previous_token", "duplicate_token"] == pytest.approx(-1.0)
    assert jaccard.loc["previous_token", "duplicate_token"] == 0.0
    assert summary["top_k_heads"] == 2


def test_positional_score_bounds():
    pattern = torch.softmax(torch.randn(1, 4, 2, 5, 5), -1)
    same = pattern[:, :1].expand(1, 4, 2, 5, 5)
    torch.testing.assert_close(positional_score(same), torch.ones(1, 2))
    assert (positional_score(pattern) < 1).all()


def test_coreference_holdout_on_planted_items():
    items = torch.zeros(20, 2, 3)
    items[:, 1, 2] = 0.5
    hold = coreference_holdout(items, n_boot=100, seed=0)
    assert (hold["layer"], hold["head"]) == (1, 2)
    assert hold["test"] == pytest.approx(0.5) and hold["low"] == pytest.approx(0.5)


def test_coreference_holdout_keeps_mirrored_sentences_on_one_side():
    import numpy as np

    from interp.analysis import bootstrap_mean_interval
    from studies.heads.inputs import COREFERENCE, SCHEMAS

    assert len(SCHEMAS) == len(COREFERENCE)
    mirrored = [i for i, s in enumerate(SCHEMAS) if SCHEMAS.count(s) == 2]
    assert [COREFERENCE[i][2] for i in mirrored] == ["Mary", "John", "girl", "boy"]
    items = torch.randn(len(SCHEMAS), 2, 3, generator=torch.Generator().manual_seed(0))
    hold = coreference_holdout(items, n_boot=200, seed=1, schemas=SCHEMAS)
    schemas = np.asarray(SCHEMAS)
    fitting = np.isin(schemas, sorted(set(SCHEMAS))[0::2])
    assert (hold["n_fit"], hold["n_test"]) == (int(fitting.sum()), int((~fitting).sum()))
    fit = items[fitting].mean(0)
    layer, head = divmod(int(fit.argmax()), 3)
    values = items[~fitting][:, layer, head].numpy()
    assert (hold["low"], hold["high"]) == bootstrap_mean_interval(values, 200, 1, groups=schemas[~fitting])[
        1:
    ]
    right = (values > 0).astype(float)
    assert hold["correct_share"] == right.mean()
    assert (hold["correct_low"], hold["correct_high"]) == bootstrap_mean_interval(
        right, 200, 1, groups=schemas[~fitting]
    )[1:]
