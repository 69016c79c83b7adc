"""QK attribution with transcoders: each MLP's row becomes feature rows, a decoder-bias row, a skip row and an
error row that add up to it; cross-layer features are one row each; transcoders of another model are refused."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from interp.analysis.qk import qk_attribution
from tests.sae.transcoder.factories import random_clt, random_set

REPLACED = ("feature", "tc_bias", "skip", "error")


@pytest.fixture(scope="module")
def model():
    cfg = TransformerConfig(
        n_layers=3, d_model=16, n_heads=4, n_kv_heads=2, d_vocab=40, n_ctx=16, seed=0, positional="rotary"
    )
    model = HookedTransformer(cfg)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.3 * torch.randn(param.shape, generator=torch.Generator().manual_seed(1)))
    return model


IDS = torch.tensor([3, 17, 5, 29, 8, 11, 2, 30])


def _rows(components, keep) -> list[int]:
    return [i for i, c in enumerate(components) if keep(c)]


def _mlp(c, layer: int) -> bool:
    return c.kind == "mlp" and c.layer == layer


def _replaced(c, layer: int) -> bool:
    """The rows that replace MLP ``layer`` (a per-layer feature's layer is the MLP it writes)."""
    return c.kind in REPLACED and c.layer == layer


@pytest.mark.parametrize("skip", [False, True])
def test_feature_rows_plus_error_equal_the_mlp_row(model, skip):
    tc = random_set(n_layers=2, d_model=16, skip=skip)
    plain = qk_attribution(model, IDS, 2, 3, 7, 4)
    split = qk_attribution(model, IDS, 2, 3, 7, 4, transcoders=tc)
    assert split.score == pytest.approx(plain.score, rel=1e-5)
    kinds = {c.kind for c in split.query_components}
    assert {"feature", "tc_bias", "error"} <= kinds and "mlp" not in kinds
    assert ("skip" in kinds) is skip
    for layer in (0, 1):
        (mlp_q,) = _rows(plain.query_components, lambda c, l=layer: _mlp(c, l))
        (mlp_k,) = _rows(plain.key_components, lambda c, l=layer: _mlp(c, l))
        q_rows = _rows(split.query_components, lambda c, l=layer: _replaced(c, l))
        k_rows = _rows(split.key_components, lambda c, l=layer: _replaced(c, l))
        assert sum(c.kind == "feature" for c in (split.query_components[i] for i in q_rows)) > 0
        # against the whole key, and against the MLP's own replacement at the key
        torch.testing.assert_close(
            split.matrix[q_rows].sum(), plain.matrix[mlp_q].sum(), atol=1e-5, rtol=1e-4
        )
        torch.testing.assert_close(
            split.matrix[q_rows][:, k_rows].sum(), plain.matrix[mlp_q, mlp_k], atol=1e-5, rtol=1e-4
        )
    same_q = _rows(split.query_components, lambda c: c.kind not in REPLACED)
    torch.testing.assert_close(
        split.matrix[same_q].sum(1),
        plain.matrix[_rows(plain.query_components, lambda c: c.kind != "mlp")].sum(1),
        atol=1e-5,
        rtol=1e-4,
    )
    assert any(label.startswith("feature 1/") and label.endswith('@"#30"') for label in split.query_labels)


def test_cross_layer_features_are_one_row_each(model):
    tc = random_clt(n_layers=2, d_model=16)
    plain = qk_attribution(model, IDS, 2, 0, 7, 7)
    split = qk_attribution(model, IDS, 2, 0, 7, 7, transcoders=tc)
    assert split.score == pytest.approx(plain.score, rel=1e-5)
    features = [c for c in split.query_components if c.kind == "feature"]
    assert len(features) == len(set(features))  # a layer-0 feature writes into MLP 0 and MLP 1: one row
    mlp = _rows(plain.query_components, lambda c: c.kind == "mlp")
    replaced = _rows(split.query_components, lambda c: c.kind in REPLACED)
    torch.testing.assert_close(split.matrix[replaced].sum(), plain.matrix[mlp].sum(), atol=1e-5, rtol=1e-4)


def test_transcoders_of_another_model_are_refused(model):
    with pytest.raises(
        ValueError, match="d_in=8 at 'blocks.0.ln2.hook_normalized', but that hook of this model "
    ):
        qk_attribution(model, IDS, 2, 0, 7, 7, transcoders=random_set(n_layers=2, d_model=8))
    with pytest.raises(ValueError, match="features at layers up to 3, the model has n_layers=3"):
        qk_attribution(model, IDS, 2, 0, 7, 7, transcoders=random_set(n_layers=4, d_model=16))
    with pytest.raises(TypeError, match="expected a sparse dictionary .* got object"):
        qk_attribution(model, IDS, 2, 0, 7, 7, transcoders=object())
