"""One interface for every dictionary: SAEs (through SAESet), transcoder sets and cross-layer transcoders."""

from __future__ import annotations

import pytest
import torch

from hooks.names import UnknownHookError
from interp.dictionary import SparseDictionary, check_fits, features, sources, written_layers
from interp.sae import SAE, SAEConfig, SAESet
from interp.sae.transcoder import TranscoderSet
from tests.sae.models import D_MODEL, random_sae, tiny_model
from tests.sae.transcoder.factories import random_clt, random_set


def test_every_kind_satisfies_the_interface_and_an_sae_does_through_its_view():
    sae = random_sae("blocks.1.hook_resid_post")
    for dictionary in (random_set(), random_clt(), SAESet(sae)):
        assert isinstance(dictionary, SparseDictionary)
    assert not isinstance(sae, SparseDictionary)  # SAE.encode keeps SAELens's signature


def test_layers_features_and_sources_enumerate_in_one_order():
    clt = random_clt(n_layers=3, d_tc=2)
    assert list(features(clt)) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert [sources(clt, out) for out in range(3)] == [[0], [0, 1], [0, 1, 2]]
    sparse = TranscoderSet(*(torch.zeros(2, 3, 4),) * 2, torch.zeros(2, 3), torch.zeros(2, 4), layers=[0, 2])
    assert written_layers(sparse) == [0, 2] and sources(sparse, 2) == [2] and sources(sparse, 1) == []
    saes = SAESet(
        [random_sae("blocks.1.hook_resid_post", d_sae=5, k=2), random_sae("hook_embed", d_sae=3, k=2)]
    )
    assert saes.layers == [0, 1] and list(features(saes))[2:4] == [(0, 2), (1, 0)]
    assert saes.input_hook(0) == "hook_embed" and saes.output_hook(1) == "blocks.1.hook_resid_post"


def _pair(skip: bool):
    """An SAELens-style transcoder and the TranscoderSet with the same weights (encoder rows transposed)."""
    sae = random_sae(
        "blocks.1.ln2.hook_normalized",
        architecture="jumprelu",
        transcoder=True,
        hook_name_out="blocks.1.hook_mlp_out",
        apply_b_dec_to_input=False,
        skip=skip,
        seed=3,
    )
    tc = TranscoderSet(
        {1: sae.W_enc.T.detach()},
        {1: sae.W_dec.detach()},
        {1: sae.b_enc.detach()},
        {1: sae.b_dec.detach()},
        threshold={1: sae.threshold.detach()},
        W_skip={1: sae.W_skip.detach()} if skip else None,
        activation="jumprelu",
    )
    return SAESet(sae), tc


@pytest.mark.parametrize("skip", [False, True])
def test_an_sae_transcoder_and_a_transcoder_set_of_the_same_weights_agree_through_the_interface(skip):
    saes, tc = _pair(skip)
    x = torch.randn(5, D_MODEL, generator=torch.Generator().manual_seed(0))
    for d in (saes, tc):
        assert (d.layers, d.input_hook(1), d.output_layers(1), d.output_hook(1)) == (
            [1],
            "blocks.1.ln2.hook_normalized",
            [1],
            "blocks.1.hook_mlp_out",
        )
        assert (d.n_features(1), d.d_in, d.d_out) == (48, D_MODEL, D_MODEL)
    (pre_s, acts_s), (pre_t, acts_t) = saes.encode(x, 1), tc.encode(x, 1)
    torch.testing.assert_close(pre_s, pre_t, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(acts_s, acts_t, atol=1e-6, rtol=1e-6)
    assert (acts_s > 0).any()
    chosen = torch.tensor([0, 7, 20])
    torch.testing.assert_close(saes.decoder(1, chosen), tc.decoder(1, chosen), atol=0, rtol=0)
    torch.testing.assert_close(saes.encoder(1, chosen), tc.encoder(1, chosen), atol=0, rtol=0)
    torch.testing.assert_close(saes.decode({1: acts_s}, 1), tc.decode({1: acts_t}, 1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(saes.reconstruct({1: x})[1], tc.reconstruct({1: x})[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(saes.reconstruct({1: x})[1], saes.sae(1)(x), atol=0, rtol=0)
    if skip:
        torch.testing.assert_close(saes.skip(x, 1), x @ saes.sae(1).W_skip.T, atol=0, rtol=0)
    else:
        assert saes.skip(x, 1) is None and tc.skip(x, 1) is None


def test_an_sae_s_encoder_rows_are_the_gradient_and_decoder_rows_the_write_per_unit():
    sae = random_sae(
        "blocks.0.hook_resid_post", rescale_acts_by_decoder_norm=True, finetuning_scaling_factor=True, seed=5
    )
    saes = SAESet(sae)
    x = torch.randn(D_MODEL, generator=torch.Generator().manual_seed(1), requires_grad=True)
    chosen = torch.tensor([3, 11, 40])
    pre = saes.encode(x, 0)[0]
    for row, f in zip(saes.encoder(0, chosen), chosen.tolist(), strict=True):
        (grad,) = torch.autograd.grad(pre[f], x, retain_graph=True)
        torch.testing.assert_close(row, grad, atol=1e-6, rtol=1e-5)
    units = torch.zeros(3, sae.d_sae)
    units[torch.arange(3), chosen] = 2.0  # two units of each chosen latent, one per row
    writes = saes.decode({0: units}, 0) - saes.decoder_bias(0)
    torch.testing.assert_close(writes, 2.0 * saes.decoder(0, chosen)[:, 0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(saes.decode({0: units}, 0), sae.decode(units), atol=0, rtol=0)


def test_an_sae_that_normalises_each_input_has_no_fixed_rows_but_encodes():
    sae = random_sae("blocks.0.hook_resid_post", normalize_activations="layer_norm")
    saes = SAESet(sae)
    x = torch.randn(4, D_MODEL, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(saes.encode(x, 0)[1], sae.encode(x), atol=0, rtol=0)
    torch.testing.assert_close(saes.reconstruct({0: x})[0], sae(x), atol=0, rtol=0)
    with pytest.raises(ValueError, match="normalize_activations='layer_norm'.*no fixed decoder rows"):
        saes.decoder(0)


def test_an_sae_set_refuses_two_saes_at_one_layer_and_an_sae_without_hooks():
    a, b = random_sae("blocks.1.hook_resid_pre"), random_sae("blocks.1.hook_resid_post")
    with pytest.raises(ValueError, match="two SAEs are at layer 1 .*pass layers="):
        SAESet([a, b])
    assert SAESet([a, b], layers=[1, 2]).output_hook(2) == "blocks.1.hook_resid_post"
    with pytest.raises(ValueError, match="the SAE has no hook_name: .*interp.sae.load"):
        SAESet(SAE(SAEConfig(d_in=4, d_sae=8, architecture="topk", k=2)))
    with pytest.raises(KeyError, match="no SAE at layer 0; its layers are \\[1\\]"):
        SAESet(a).encode(torch.zeros(D_MODEL), 0)


def test_one_fit_check_for_every_kind():
    model = tiny_model()
    # A cross-layer transcoder over the first layers fits, as a set over some layers does.
    for fits in (
        random_set(),
        random_clt(),
        random_clt(n_layers=1),
        SAESet(random_sae("blocks.1.hook_resid_post")),
    ):
        check_fits(model, fits)
    with pytest.raises(TypeError, match="expected a sparse dictionary .*got SAE"):
        check_fits(model, random_sae("blocks.1.hook_resid_post"))
    with pytest.raises(UnknownHookError, match="input hook of layer 1: unknown hook .*did you mean"):
        check_fits(model, SAESet(random_sae("blocks.1.hook_resid_pst")))
    with pytest.raises(
        ValueError, match="has d_in=8 at 'blocks.0.hook_resid_post', but that hook .*width 16"
    ):
        check_fits(model, SAESet(random_sae("blocks.0.hook_resid_post", d_in=8)))
    backwards = random_sae(
        "blocks.1.hook_mlp_out",
        transcoder=True,
        hook_name_out="blocks.1.hook_resid_mid",
        apply_b_dec_to_input=False,
    )
    with pytest.raises(ValueError, match="reads 'blocks.1.hook_mlp_out', which the forward reaches after"):
        check_fits(model, SAESet(backwards))
    with pytest.raises(ValueError, match="reaches after"):  # refused before the forward, not during it
        with model.saes([backwards]):
            pass
