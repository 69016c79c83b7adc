"""A dictionary's features on a prompt (every activation, a feature split over the positions attention read)
and the features nearest a direction by decoder cosine, against naive computations written here."""

from __future__ import annotations

import pytest
import torch

from interp.analysis.decoder_similarity import decoder_similarity
from interp.analysis.feature_activations import direct_feature_attribution, feature_activations
from interp.sae import SAESet
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders
from tests.sae.models import random_sae

TOKENS = torch.tensor([3, 17, 5, 9, 11, 8, 2])


def test_every_layers_activations_are_the_encoded_inputs_of_one_full_forward():
    model = tiny(n_layers=3)
    saes = SAESet(
        [random_sae("blocks.0.hook_resid_post", seed=1), random_sae("blocks.1.hook_resid_pre", seed=2)]
    )
    tc = tiny_transcoders(model.cfg, d_transcoder=12, kind="clt")
    for dictionary in (saes, tc):
        hooks = sorted({dictionary.input_hook(layer) for layer in dictionary.layers})
        _, cache = model.run_with_cache(TOKENS[None], names_filter=hooks)  # the whole forward, no early stop
        got = feature_activations(model, dictionary, TOKENS)
        assert sorted(got) == list(dictionary.layers)
        for layer, acts in got.items():
            expected = dictionary.encode(cache[dictionary.input_hook(layer)][0], layer)[1].float()
            assert torch.equal(acts, expected)  # the same kernels on the same values, stopped early or not
    one = feature_activations(model, saes, TOKENS, layers=[0])
    assert list(one) == [0] and one[0].shape == (len(TOKENS), 48)
    with pytest.raises(ValueError, match=r"no features at layer\(s\) \[2\]"):
        feature_activations(model, saes, TOKENS, layers=[2])


@pytest.mark.parametrize("n_kv_heads", [4, 2])
def test_direct_feature_attribution_splits_the_pre_activation_over_key_positions(n_kv_heads):
    model = tiny("llama-gqa", n_kv_heads=n_kv_heads)
    cfg = model.cfg
    hook = "blocks.1.attn.hook_z"
    saes = SAESet(
        random_sae(
            hook, d_in=cfg.n_heads * cfg.d_head, architecture="standard", reshape_activations="hook_z", seed=3
        )
    )
    feature, t = 7, 5
    dfa = direct_feature_attribution(model, saes, TOKENS, 1, feature, t)
    _, cache = model.run_with_cache(TOKENS[None])
    v, pattern = cache["blocks.1.attn.hook_v"][0], cache["blocks.1.attn.hook_pattern"][0]
    w = saes.sae(1).W_enc[:, feature].view(cfg.n_heads, cfg.d_head)
    group = cfg.n_heads // n_kv_heads
    naive = torch.zeros(len(TOKENS))
    for s in range(len(TOKENS)):
        for h in range(cfg.n_heads):
            naive[s] += pattern[h, t, s] * (v[s, h // group] @ w[h])
    torch.testing.assert_close(dfa, naive, rtol=1e-5, atol=1e-6)
    assert torch.all(dfa[t + 1 :] == 0)  # causal: nothing read from later positions
    z = cache[hook][0, t].flatten()  # [head * d_head]
    torch.testing.assert_close(dfa.sum(), z @ w.flatten(), rtol=1e-5, atol=1e-6)  # the terms add up
    with pytest.raises(ValueError, match="not blocks.L.attn.hook_z"):
        direct_feature_attribution(model, SAESet(random_sae("blocks.1.hook_resid_pre")), TOKENS, 1, 0, 2)


def test_decoder_similarity_ranks_features_by_cosine_with_the_direction():
    torch.manual_seed(0)
    sae = random_sae("blocks.0.hook_resid_post", d_sae=20, seed=4).requires_grad_(False)
    with torch.no_grad():
        sae.W_dec[3] = 0.0  # a dead row: similarity 0
        sae.W_dec[9] = float("nan")  # a broken row ranks last
    saes = SAESet(sae)
    direction = torch.randn(saes.d_out)
    values, features = decoder_similarity(saes, 0, direction, 20)
    naive = {
        i: 0.0 if i == 3 else float(torch.nn.functional.cosine_similarity(sae.W_dec[i], direction, dim=0))
        for i in range(20)
        if i != 9
    }
    order = sorted(naive, key=lambda i: -naive[i])
    assert features.tolist()[:19] == order and features.tolist()[19] == 9
    torch.testing.assert_close(values[:19], torch.tensor([naive[i] for i in order]), rtol=1e-5, atol=1e-6)
    assert values[19] == float("-inf")
    own = decoder_similarity(saes, 0, sae.W_dec[5].detach(), 1)
    assert own[1].tolist() == [5] and own[0].item() == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="k=21; give 1 to 20"):
        decoder_similarity(saes, 0, direction, 21)
    with pytest.raises(ValueError, match="writes vectors of width 16"):
        decoder_similarity(saes, 0, torch.ones(3), 2)
