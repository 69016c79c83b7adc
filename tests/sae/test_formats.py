"""Each format, written in the test from random weights, loads and encodes/decodes as its own reference code.

The expected values are the formulas of each library's code written out here independently: SAELens's
``process_sae_in`` / ``encode`` / ``decode`` (normalisation, ``b_dec`` subtracted when
``apply_b_dec_to_input``, ReLU, JumpReLU, TopK), sparsify's ``encode`` (``x - b_dec`` unless a transcoder,
``relu(x @ encoder.weight.T + bias)``, top k) and ``decode``, and Gemma Scope's JumpReLU.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import interp.sae as sae_lib
from interp.sae import SAE, SAEConfig, SAEFormatError

D_IN, D_SAE = 12, 40
ATOL = 1e-5


def _rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _x(seed=100, n=7):
    return _rand(n, D_IN, seed=seed) * 3 + 1


def _write_saelens(folder, cfg, tensors):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cfg.json").write_text(json.dumps(cfg))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "sae_weights.safetensors"))
    return folder


def _weights(d_out=D_IN, seed=0, threshold=False):
    w = {
        "W_enc": _rand(D_IN, D_SAE, seed=seed),
        "b_enc": _rand(D_SAE, seed=seed + 1) * 0.5,
        "W_dec": _rand(D_SAE, d_out, seed=seed + 2),
        "b_dec": _rand(d_out, seed=seed + 3),
    }
    if threshold:
        w["threshold"] = _rand(D_SAE, seed=seed + 4).abs()
    return w


def _topk_dense(pre, k):
    values, idx = pre.topk(k, dim=-1)
    return torch.zeros_like(pre).scatter(-1, idx, values.relu())


def _v6(arch, **fields):
    meta = {"hook_name": "blocks.1.hook_resid_post", "model_name": "tiny", "sae_lens_version": "6.5.0"}
    return {
        "architecture": arch,
        "d_in": D_IN,
        "d_sae": D_SAE,
        "dtype": "float32",
        "metadata": meta,
        **fields,
    }


@pytest.mark.parametrize("apply_b_dec", [True, False])
def test_saelens_standard(tmp_path, apply_b_dec):
    w = _weights()
    folder = _write_saelens(tmp_path / "sae", _v6("standard", apply_b_dec_to_input=apply_b_dec), w)
    sae = sae_lib.load(folder)
    x = _x()
    sae_in = x - w["b_dec"] * apply_b_dec
    acts = torch.relu(sae_in @ w["W_enc"] + w["b_enc"])
    torch.testing.assert_close(sae.encode(x), acts, atol=ATOL, rtol=0)
    torch.testing.assert_close(sae.decode(acts), acts @ w["W_dec"] + w["b_dec"], atol=ATOL, rtol=0)
    assert sae.hook_name == "blocks.1.hook_resid_post" and sae.cfg.metadata["format"] == "saelens"


def test_saelens_topk_and_jumprelu(tmp_path):
    x = _x()
    w = _weights()
    sae = sae_lib.load(_write_saelens(tmp_path / "topk", _v6("topk", k=5), w))
    pre = (x - w["b_dec"]) @ w["W_enc"] + w["b_enc"]
    torch.testing.assert_close(sae.encode(x), _topk_dense(pre, 5), atol=ATOL, rtol=0)
    assert sae.cfg.k == 5 and (sae.encode(x) != 0).sum(-1).max() <= 5

    rescale = sae_lib.load(
        _write_saelens(tmp_path / "rescale", _v6("topk", k=5, rescale_acts_by_decoder_norm=True), w)
    )
    norms = w["W_dec"].norm(dim=-1)
    acts = _topk_dense(pre * norms, 5)
    torch.testing.assert_close(rescale.encode(x), acts, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        rescale.decode(acts), (acts / norms) @ w["W_dec"] + w["b_dec"], atol=ATOL, rtol=0
    )

    wj = _weights(threshold=True)
    jump = sae_lib.load(_write_saelens(tmp_path / "jump", _v6("jumprelu", apply_b_dec_to_input=False), wj))
    pre = x @ wj["W_enc"] + wj["b_enc"]
    torch.testing.assert_close(jump.encode(x), torch.relu(pre) * (pre > wj["threshold"]), atol=ATOL, rtol=0)


def test_saelens_input_normalisations(tmp_path):
    w = _weights()
    x = _x()
    sae = sae_lib.load(
        _write_saelens(tmp_path / "cnr", _v6("standard", normalize_activations="constant_norm_rescale"), w)
    )
    coeff = D_IN**0.5 / x.norm(dim=-1, keepdim=True)
    acts = torch.relu((x * coeff - w["b_dec"]) @ w["W_enc"] + w["b_enc"])
    torch.testing.assert_close(sae.encode(x), acts, atol=ATOL, rtol=0)
    torch.testing.assert_close(sae(x), (acts @ w["W_dec"] + w["b_dec"]) / coeff, atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match="decode\\(acts, x\\)"):
        sae.decode(acts)

    ln = sae_lib.load(_write_saelens(tmp_path / "ln", _v6("standard", normalize_activations="layer_norm"), w))
    mu = x.mean(-1, keepdim=True)
    std = (x - mu).std(-1, keepdim=True)  # torch's unbiased std, as SAELens uses
    acts = torch.relu(((x - mu) / (std + 1e-5) - w["b_dec"]) @ w["W_enc"] + w["b_enc"])
    torch.testing.assert_close(ln.encode(x), acts, atol=ATOL, rtol=0)
    torch.testing.assert_close(
        ln.decode(acts, x), (acts @ w["W_dec"] + w["b_dec"]) * std + mu, atol=ATOL, rtol=0
    )


def test_saelens_pre_6_config_names(tmp_path):
    """Before 6.0: hook_point, activation_fn_str, TopK in activation_fn_kwargs, a bool normalisation."""
    w = _weights()
    cfg = {
        "d_in": D_IN,
        "d_sae": D_SAE,
        "dtype": "torch.float32",
        "hook_point": "blocks.0.hook_resid_pre",
        "hook_point_layer": 0,
        "activation_fn_str": "topk",
        "activation_fn_kwargs": {"k": 3},
        "normalize_activations": False,
        "model_name": "gpt2",
    }
    sae = sae_lib.load(_write_saelens(tmp_path / "old", cfg, w))
    assert (sae.cfg.architecture, sae.cfg.k, sae.hook_name) == ("topk", 3, "blocks.0.hook_resid_pre")
    assert sae.cfg.apply_b_dec_to_input and sae.cfg.normalize_activations == "none"
    x = _x()
    torch.testing.assert_close(
        sae.encode(x), _topk_dense((x - w["b_dec"]) @ w["W_enc"] + w["b_enc"], 3), atol=ATOL, rtol=0
    )


def test_saelens_finetuning_scale_and_ones_scale(tmp_path):
    w = _weights()
    scale = _rand(D_SAE, seed=9).abs() + 0.5
    cfg = {
        "d_in": D_IN,
        "d_sae": D_SAE,
        "hook_point": "blocks.0.hook_resid_pre",
        "finetuning_scaling_factor": True,
    }
    sae = sae_lib.load(_write_saelens(tmp_path / "ft", cfg, {**w, "scaling_factor": scale}))
    acts = sae.encode(_x())
    torch.testing.assert_close(sae.decode(acts), (acts * scale) @ w["W_dec"] + w["b_dec"], atol=ATOL, rtol=0)
    ones = sae_lib.load(
        _write_saelens(
            tmp_path / "ones",
            {**cfg, "finetuning_scaling_factor": False},
            {**w, "scaling_factor": torch.ones(D_SAE)},
        )
    )
    assert not ones.cfg.finetuning_scaling_factor
    with pytest.raises(SAEFormatError, match="finetuning_scaling_factor false"):
        sae_lib.load(
            _write_saelens(
                tmp_path / "bad", {**cfg, "finetuning_scaling_factor": False}, {**w, "scaling_factor": scale}
            )
        )


def test_saelens_transcoders(tmp_path):
    d_out = 9
    w = _weights(d_out=d_out)
    cfg = _v6("transcoder", d_out=d_out, apply_b_dec_to_input=False)
    cfg["metadata"]["hook_name_out"] = "blocks.1.hook_mlp_out"
    tc = sae_lib.load(_write_saelens(tmp_path / "tc", cfg, w))
    assert tc.cfg.transcoder and tc.hook_name_out == "blocks.1.hook_mlp_out" and tc.d_out == d_out
    x = _x()
    acts = torch.relu(x @ w["W_enc"] + w["b_enc"])
    torch.testing.assert_close(tc(x), acts @ w["W_dec"] + w["b_dec"], atol=ATOL, rtol=0)
    skip = _rand(d_out, D_IN, seed=7)
    sk = sae_lib.load(
        _write_saelens(tmp_path / "skip", {**cfg, "architecture": "skip_transcoder"}, {**w, "W_skip": skip})
    )
    torch.testing.assert_close(sk(x), acts @ w["W_dec"] + w["b_dec"] + x @ skip.T, atol=ATOL, rtol=0)


def test_sparsify_autoencoder_subtracts_b_dec_and_transcoder_does_not(tmp_path):
    enc_w, enc_b = _rand(D_SAE, D_IN, seed=1), _rand(D_SAE, seed=2)
    w_dec, b_dec = _rand(D_SAE, D_IN, seed=3), _rand(D_IN, seed=4)
    x = _x()
    for transcode in (False, True):
        folder = tmp_path / ("layers.3.mlp" if transcode else "layers.3")
        folder.mkdir()
        (folder / "cfg.json").write_text(
            json.dumps(
                {"d_in": D_IN, "k": 4, "num_latents": D_SAE, "expansion_factor": 32, "transcode": transcode}
            )
        )
        save_file(
            {"encoder.weight": enc_w, "encoder.bias": enc_b, "W_dec": w_dec, "b_dec": b_dec},
            str(folder / "sae.safetensors"),
        )
        sae = sae_lib.load(folder)
        sae_in = x if transcode else x - b_dec
        pre = torch.relu(sae_in @ enc_w.T + enc_b)  # sparsify: relu, then the top k
        values, idx = pre.topk(4, dim=-1)
        torch.testing.assert_close(
            sae.encode(x), torch.zeros_like(pre).scatter(-1, idx, values), atol=ATOL, rtol=0
        )
        decoded = (w_dec[idx] * values[..., None]).sum(-2) + b_dec  # sparsify's decode: the kept rows, summed
        torch.testing.assert_close(sae(x), decoded, atol=ATOL, rtol=0)
        assert sae.cfg.transcoder is transcode and sae.cfg.metadata["format"] == "sparsify"
        assert sae.hook_name == (None if transcode else "blocks.3.hook_resid_post")


def test_gemma_scope_params_npz(tmp_path):
    w = _weights(threshold=True)
    folder = tmp_path / "gemma-scope-2b-pt-res" / "layer_1" / "width_16k" / "average_l0_20"
    folder.mkdir(parents=True)
    np.savez(folder / "params.npz", **{k: v.numpy() for k, v in w.items()})
    sae = sae_lib.load(folder / "params.npz")
    assert sae.hook_name == "blocks.1.hook_resid_post" and not sae.cfg.apply_b_dec_to_input
    x = _x()
    pre = x @ w["W_enc"] + w["b_enc"]
    acts = (pre > w["threshold"]) * torch.relu(pre)  # Gemma Scope's reference encode: no b_dec first
    torch.testing.assert_close(sae.encode(x), acts, atol=ATOL, rtol=0)
    torch.testing.assert_close(sae.decode(acts), acts @ w["W_dec"] + w["b_dec"], atol=ATOL, rtol=0)
    other = tmp_path / "plain"
    other.mkdir()
    np.savez(other / "params.npz", **{k: v.numpy() for k, v in w.items()})
    assert sae_lib.load(other).hook_name is None
    assert sae_lib.load(other, hook_name="blocks.0.hook_mlp_out").hook_name == "blocks.0.hook_mlp_out"


def test_save_roundtrip_and_batchtopk_as_jumprelu(tmp_path):
    for cfg in (
        SAEConfig(d_in=D_IN, d_sae=D_SAE, architecture="topk", k=3, hook_name="blocks.0.hook_resid_post"),
        SAEConfig(
            d_in=D_IN, d_sae=D_SAE, architecture="batchtopk", k=3, hook_name="blocks.0.hook_resid_post"
        ),
        SAEConfig(
            d_in=D_IN,
            d_sae=D_SAE,
            architecture="standard",
            transcoder=True,
            d_out=5,
            apply_b_dec_to_input=False,
            hook_name="blocks.0.ln2.hook_normalized",
            hook_name_out="blocks.0.hook_mlp_out",
        ),
    ):
        sae = SAE(cfg)
        with torch.no_grad():
            for i, p in enumerate(sae.parameters()):
                p.copy_(_rand(*p.shape, seed=20 + i))
            if cfg.has_threshold:
                sae.threshold.abs_()
        again = sae_lib.load(sae_lib.save(sae, tmp_path / cfg.architecture))
        x = _x()
        torch.testing.assert_close(again(x), sae(x), atol=ATOL, rtol=0)
        assert again.hook_name_out == sae.hook_name_out
    assert json.loads((tmp_path / "batchtopk" / "cfg.json").read_text())["architecture"] == "jumprelu"


def test_config_that_disagrees_with_weights_names_both(tmp_path):
    w = _weights()
    folder = _write_saelens(tmp_path / "bad", {**_v6("standard"), "d_sae": 64}, w)
    with pytest.raises(SAEFormatError, match=r"W_enc has shape \[12, 40\].*d_sae=64.*\[12, 64\]"):
        sae_lib.load(folder)


def test_unknown_folders_and_pickles_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(SAEFormatError, match="not an SAE folder of a known format.*notes.txt"):
        sae_lib.load(tmp_path / "empty")
    pickle = tmp_path / "sae.pt"
    pickle.write_bytes(b"this would be unpickled")
    with pytest.raises(SAEFormatError, match="pickle.*never loaded.*safetensors"):
        sae_lib.load(pickle)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "model.bin").write_bytes(b"x")
    with pytest.raises(SAEFormatError, match="model.bin, a pickle"):
        sae_lib.load(tmp_path / "ckpt")
    with pytest.raises(FileNotFoundError):
        sae_lib.load(tmp_path / "missing")


def test_config_checks():
    with pytest.raises(ValueError, match="k=50 is larger than d_sae=40"):
        SAEConfig(d_in=4, d_sae=40, architecture="topk", k=50)
    with pytest.raises(ValueError, match="needs k >= 1"):
        SAEConfig(d_in=4, d_sae=40, architecture="topk")
    with pytest.raises(ValueError, match="transcoder=True"):
        SAEConfig(d_in=4, d_sae=8, architecture="standard", hook_name_out="blocks.0.hook_mlp_out")
