"""``interp.sae.evaluate`` of a Lorsa, alone and in the complete replacement model, against the same metrics
computed here by hand on a padded batch: FVU from the clean run's sequences, CE recovered, and the next-token
agreement with the model."""

from __future__ import annotations

import math

import pytest
import torch

from interp.sae import evaluate, spliced
from tests.sae.lorsa.test_splice import _lorsa, _model
from tests.sae.models import D_MODEL, tokens
from tests.sae.transcoder.factories import random_set


def _batch():
    ids = tokens(batch=3, pos=8, seed=5)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # left padding
    mask[1, 6:] = 0  # right padding
    return ids, mask


def _next_token(logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> tuple[float, torch.Tensor]:
    """Mean next-token NLL and the argmax predictions, at positions with a next real token."""
    pairs = mask.bool()[:, :-1] & mask.bool()[:, 1:]
    logp = logits[:, :-1].double().log_softmax(-1)
    nll = -logp.gather(-1, ids[:, 1:, None])[..., 0]
    return float(nll[pairs].mean()), logp.argmax(-1)[pairs]


def test_a_lorsa_is_evaluated_on_its_sequences_with_ce_recovered_and_agreement():
    model, lorsa = _model(), _lorsa()
    ids, mask = _batch()
    table = evaluate(model, lorsa, ids, mask, batch_size=3)
    assert table["layer"].tolist() == [0, 1] and table["hook"].tolist() == [
        "blocks.0.hook_attn_out",
        "blocks.1.hook_attn_out",
    ]
    with torch.no_grad():
        clean, cache = model.run_with_cache(
            ids, mask, names_filter=["*.ln1.hook_normalized", "*.hook_attn_out"]
        )
        with spliced(model, lorsa):
            replaced = model(ids, mask)
        zeroed = model.run_with_hooks(
            ids, mask, fwd_hooks=[("*.hook_attn_out", lambda a, hook: torch.zeros_like(a))]
        )
    real = mask.bool()
    for row in table.itertuples():
        x, y = cache[f"blocks.{row.layer}.ln1.hook_normalized"], cache[row.hook][real].double()
        # each sequence's real tokens alone, as a sequence of their own: padding neither seen nor counted
        alone = [x[i : i + 1, real[i]] for i in range(3)]
        with torch.no_grad():
            out = torch.cat([lorsa.reconstruct({row.layer: seq})[row.layer][0] for seq in alone])
        fvu = float((out.double() - y).pow(2).sum() / (y - y.mean(0)).pow(2).sum())
        assert math.isclose(row.fvu, fvu, rel_tol=1e-5), (row.layer, row.fvu, fvu)
        assert row.n_tokens == int(real.sum())
    ce_clean, top_clean = _next_token(clean, ids, mask)
    ce_spliced, top_spliced = _next_token(replaced, ids, mask)
    ce_zero, _ = _next_token(zeroed, ids, mask)
    row = table.iloc[0]
    assert math.isclose(row.ce_clean, ce_clean, rel_tol=1e-5) and math.isclose(
        row.ce_spliced, ce_spliced, rel_tol=1e-5
    )
    assert math.isclose(row.ce_recovered_zero, (ce_zero - ce_spliced) / (ce_zero - ce_clean), rel_tol=1e-4)
    agreement = float((top_clean == top_spliced).double().mean())
    assert row.agreement == pytest.approx(agreement, abs=1e-12) and 0 < agreement < 1


def test_the_complete_replacement_model_is_evaluated_as_one():
    model, lorsa = _model(), _lorsa()
    tc = random_set(2, d_model=D_MODEL, activation="topk", k=4)
    ids, mask = _batch()
    together = evaluate(model, [lorsa, tc], ids, mask, together=True)
    apart = evaluate(model, [lorsa, tc], ids, mask)
    assert together["hook"].tolist() == [f"blocks.{i}.hook_{s}_out" for s in ("attn", "mlp") for i in (0, 1)]
    with torch.no_grad():
        with spliced(model, [lorsa, tc]):
            replaced = model(ids, mask)
        clean = model(ids, mask)
    ce, top = _next_token(replaced, ids, mask)
    _, top_clean = _next_token(clean, ids, mask)
    assert together["ce_spliced"].tolist() == pytest.approx([ce] * 4, rel=1e-5)
    assert together["agreement"].tolist() == pytest.approx([float((top == top_clean).double().mean())] * 4)
    # the reconstruction columns are each layer's alone; the spliced columns are the whole's
    assert together["fvu"].tolist() == pytest.approx(apart["fvu"].tolist(), rel=1e-6)
    assert together["ce_spliced"].iloc[0] != pytest.approx(apart["ce_spliced"].iloc[0])
    with pytest.raises(ValueError, match="dictionaries 0 and 1 both write 'blocks.0.hook_attn_out'"):
        evaluate(model, [lorsa, _lorsa(layers=(0,))], ids, mask, together=True)
