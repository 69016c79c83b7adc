"""QK attribution is exact on every family interp loads: the terms sum to the score ``transformers`` computes.

Each reference is a tiny random checkpoint of the family with widened weights (``tests/load/families.py``),
converted with ``from_hf``; the score is read from the reference's own query and key states times its
scaling (``tests/analysis/qk_reference.py``), before any soft-cap. Heads in the first, a middle and the last
layer are checked, at a query late enough that sliding windows bite and keys inside the window.
"""

from __future__ import annotations

import pytest
import torch

from interp import from_hf
from interp.analysis.qk import qk_attribution
from tests.analysis.qk_reference import embolden_gpt2_bert, reference_scores
from tests.load.families import FAMILIES, WINDOW, build

VOCAB = 97
N_POS = 12
RTOL = 1e-4


def _reference(name: str) -> torch.nn.Module:
    if name in ("gpt2", "bert"):
        return embolden_gpt2_bert(name, VOCAB)
    return build(name, VOCAB)


def _cases(model) -> list[tuple[int, int, int, int]]:
    """(layer, head, query, key): first, middle and last layer; keys near the query and far from it."""
    cfg = model.cfg
    layers = sorted({0, cfg.n_layers // 2, cfg.n_layers - 1})
    query = N_POS - 2
    cases = []
    for layer in layers:
        far = 0 if cfg.window(layer) is None else query - WINDOW + 1
        for head, key in ((0, query), (cfg.n_heads - 1, far), (cfg.n_heads // 2, query - 2)):
            cases.append((layer, head, query, key))
    return cases


@pytest.mark.parametrize("name", sorted(FAMILIES) + ["gpt2", "bert"])
def test_terms_sum_to_the_score_transformers_computes(name):
    reference = _reference(name)
    model = from_hf(reference)
    ids = torch.randint(2, VOCAB, (1, N_POS), generator=torch.Generator().manual_seed(3))
    expected = reference_scores(reference, ids)
    assert len(expected) == model.cfg.n_layers
    for layer, head, query, key in _cases(model):
        attribution = qk_attribution(model, ids, layer, head, query, key)
        want = float(expected[layer][head, query, key])
        got = float(attribution.matrix.double().sum())
        assert abs(got - want) <= RTOL * abs(want) + 1e-6, (layer, head, query, key, got, want)
        assert attribution.score == pytest.approx(got)
        assert attribution.capped == pytest.approx(attribution.model_score, rel=1e-4, abs=1e-5)
