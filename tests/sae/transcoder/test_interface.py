"""The transcoder interface against naive computations written here, and its errors on bad input."""

from __future__ import annotations

import pytest
import torch

from interp.sae.transcoder import CrossLayerTranscoder, TranscoderSet
from tests.sae.transcoder.factories import random_clt, random_set


def _naive_act(pre, activation, k=None, threshold=None):
    out = torch.zeros_like(pre)
    if activation == "relu":
        return torch.where(pre > 0, pre, out)
    if activation == "jumprelu":
        return torch.where(pre > threshold, pre, out)
    rows = pre.reshape(-1, pre.shape[-1])
    flat_out = out.reshape(-1, pre.shape[-1])
    if activation == "topk":
        for i, row in enumerate(rows):
            keep = sorted(range(len(row)), key=lambda j: -row[j].item())[:k]
            flat_out[i, keep] = row[keep]
        return flat_out.reshape(pre.shape)
    flat = rows.reshape(-1)
    keep = sorted(range(len(flat)), key=lambda j: -flat[j].item())[: k * rows.shape[0]]
    result = torch.zeros_like(flat)
    result[keep] = flat[keep]
    return result.reshape(pre.shape)


@pytest.mark.parametrize(
    ("activation", "k"), [("relu", None), ("jumprelu", None), ("topk", 3), ("batchtopk", 3)]
)
@pytest.mark.parametrize("kind", ["set", "clt"])
def test_encode_is_the_affine_map_then_the_activation(kind, activation, k):
    tc = (random_set if kind == "set" else random_clt)(activation=activation, k=k)
    x = torch.randn(2, 5, 16)
    for layer in tc.layers:
        pre, acts = tc.encode(x, layer)
        want_pre = torch.einsum("bpd,fd->bpf", x, tc.W_enc[layer]) + tc.b_enc[layer]
        torch.testing.assert_close(pre, want_pre)
        torch.testing.assert_close(acts, _naive_act(want_pre, activation, k, tc.threshold(layer)))
    if activation == "topk":
        assert (acts != 0).sum(-1).eq(3).all()


@pytest.mark.parametrize("kind", ["set", "clt"])
def test_encoder_rows_are_the_derivative_of_the_pre_activations(kind):
    tc = random_set() if kind == "set" else random_clt()
    features = torch.tensor([5, 0, 5, 3])
    for layer in tc.layers:
        x = torch.randn(len(features), tc.d_model, requires_grad=True)
        pre = tc.pre_acts(x, layer).gather(1, features[:, None]).sum()
        (want,) = torch.autograd.grad(pre, x)  # row i: d pre[i, features[i]] / d x[i]
        torch.testing.assert_close(tc.encoder(layer, features), want)


def test_a_set_reads_and_writes_its_own_layer():
    g = torch.Generator().manual_seed(3)
    W = {0: torch.randn(6, 4, generator=g), 2: torch.randn(6, 4, generator=g)}
    b = {0: torch.randn(6, generator=g), 2: torch.randn(6, generator=g)}
    bd = {0: torch.randn(4, generator=g), 2: torch.randn(4, generator=g)}
    tc = TranscoderSet(W, W, b, bd, n_layers=4, input_site="hook_resid_mid")
    assert tc.layers == [0, 2] and tc.n_layers == 4 and (tc.d_model, tc.d_transcoder) == (4, 6)
    assert tc.input_hook(2) == "blocks.2.hook_resid_mid" and tc.output_hook(2) == "blocks.2.hook_mlp_out"
    assert tc.output_layers(2) == [2]
    assert torch.equal(tc.decoder(2, torch.tensor([4, 1])), W[2][[4, 1]][:, None, :])
    acts = torch.rand(3, 6)
    torch.testing.assert_close(tc.decode({2: acts, 0: acts * 0}, 2), acts @ W[2] + bd[2])
    with pytest.raises(KeyError, match="has no features at layer 1; its layers are \\[0, 2\\]"):
        tc.input_hook(1)


@pytest.mark.parametrize("skip", [False, True])
def test_clt_outputs_sum_every_earlier_layers_decoders(skip):
    n = 3
    clt = random_clt(n, activation="topk", k=4, skip=skip)
    assert clt.output_layers(0) == [0, 1, 2] and clt.output_layers(2) == [2]
    feats = torch.tensor([7, 2, 7])
    rows = clt.decoder(1, feats)
    assert rows.shape == (3, 2, 16) and torch.equal(rows, clt.W_dec[1][feats])
    inputs = {i: torch.randn(5, 16) for i in range(n)}
    outs = clt.reconstruct(inputs)
    acts = {i: clt.encode(inputs[i], i)[1] for i in range(n)}
    for out_layer in range(n):
        want = clt.b_dec[out_layer].clone()
        for s in range(out_layer + 1):
            want = want + acts[s] @ clt.W_dec[s][:, out_layer - s, :]
        if skip:
            want = want + inputs[out_layer] @ clt.W_skip[out_layer].T
        torch.testing.assert_close(outs[out_layer], want)
        torch.testing.assert_close(
            clt.decode(acts, out_layer), want - (clt.skip(inputs[out_layer], out_layer) if skip else 0)
        )
    assert clt.skip(inputs[0], 0) is None or skip
    with pytest.raises(KeyError, match="needs the activations of layers \\[0, 1, 2\\]; missing \\[1\\]"):
        clt.decode({0: acts[0], 2: acts[2]}, 2)


def test_a_lazy_clt_reads_the_rows_it_is_asked_for():
    eager = random_clt(3)
    reads = []

    def reader(layer, features):
        reads.append((layer, None if features is None else features.tolist()))
        w = eager.W_dec[layer].detach()
        return w if features is None else w[features]

    lazy = CrossLayerTranscoder(
        eager.W_enc.detach(), None, eager.b_enc.detach(), eager.b_dec.detach(), decoder_reader=reader
    )
    assert lazy.lazy and not eager.lazy
    assert torch.equal(lazy.decoder(2, torch.tensor([3, 1])), eager.W_dec[2][[3, 1]])
    assert reads == [(2, [3, 1])]
    inputs = {i: torch.randn(4, 16) for i in range(3)}
    for layer, out in lazy.reconstruct(inputs).items():
        torch.testing.assert_close(out, eager.reconstruct(inputs)[layer])


def test_bad_tensors_and_settings_get_one_clear_line():
    W = torch.randn(2, 8, 4)
    b, bd = torch.zeros(2, 8), torch.zeros(2, 4)
    with pytest.raises(ValueError, match=r"W_dec has shape \(2, 8, 5\); expected \[2, 8, 4\]"):
        TranscoderSet(W, torch.randn(2, 8, 5), b, bd)
    with pytest.raises(ValueError, match="activation='gelu'; expected one of"):
        TranscoderSet(W, W, b, bd, activation="gelu")
    with pytest.raises(ValueError, match="topk transcoder needs k >= 1"):
        TranscoderSet(W, W, b, bd, activation="topk")
    with pytest.raises(ValueError, match="jumprelu transcoder needs a threshold"):
        TranscoderSet(W, W, b, bd, activation="jumprelu")
    with pytest.raises(ValueError, match=r"W_dec\[1\] has shape \(8, 2, 4\); expected \[8, 1, 4\]"):
        CrossLayerTranscoder(W, [torch.randn(8, 2, 4), torch.randn(8, 2, 4)], b, bd)
    with pytest.raises(ValueError, match="exactly one of W_dec"):
        CrossLayerTranscoder(W, None, b, bd)
    tc = TranscoderSet(W, W, b, bd)
    with pytest.raises(ValueError, match="the input at layer 0 has last dimension 5 .* d_model=4"):
        tc.encode(torch.randn(3, 5), 0)
