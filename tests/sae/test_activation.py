"""TopK and JumpReLU per format: whether the values they keep go through a ReLU (:mod:`interp.sae.activation`).

Every case has a token with fewer than ``k`` positive pre-activations, or a negative threshold, where the two
conventions differ. Each dictionary is built with an identity encoder and no biases, so its pre-activations are
its input. circuit-tracer's ``TopK`` and ``JumpReLU`` run live in circuit-tracer 0.5.0's own environment; the
expected codes of SAELens 6, sparsify 1.3.3 and Gemma Scope are their reference code's formulas written out
here: SAELens's ``TopK`` applies ``relu`` to the values ``torch.topk`` keeps, and its ``JumpReLUSAE.encode`` is
``relu(pre) * (pre > threshold)``; sparsify's ``fused_encoder`` takes ``relu`` of the pre-activations before
``torch.topk``; Gemma Scope's reference encode is ``(pre > threshold) * relu(pre)``.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import torch
from safetensors.torch import load_file, save_file

import interp.sae as sae_lib
from interp.sae.activation import activate
from interp.sae.transcoder import TranscoderSet
from tests.reference_envs import require

D, K = 6, 3
# Row 0 has one positive pre-activation, row 1 none, row 2 four: TopK keeps negatives in rows 0 and 1.
PRE = torch.tensor(
    [
        [-0.5, 2.0, -1.5, -0.25, -3.0, -2.0],
        [-1.0, -0.1, -2.0, -0.3, -4.0, -0.2],
        [1.0, 2.0, -1.0, 3.0, 0.5, -2.0],
    ]
)
THRESHOLD = torch.tensor([-1.0, 0.5, -3.0, -0.2, 0.0, 1.0])  # negatives let negative values through


def _relu_top_k(pre: torch.Tensor, k: int) -> torch.Tensor:
    values, indices = pre.topk(k, dim=-1)
    return torch.zeros_like(pre).scatter(-1, indices, values.relu())


def _raw_top_k(pre: torch.Tensor, k: int) -> torch.Tensor:
    values, indices = pre.topk(k, dim=-1)
    return torch.zeros_like(pre).scatter(-1, indices, values)


def test_the_conventions_differ_on_these_inputs():
    assert not torch.equal(_relu_top_k(PRE, K), _raw_top_k(PRE, K))
    assert not torch.equal(PRE.relu() * (PRE > THRESHOLD), PRE * (PRE > THRESHOLD))
    for rectify in (True, False):
        dense = activate(PRE, "topk", rectify=rectify, k=K)
        torch.testing.assert_close(dense, (_relu_top_k if rectify else _raw_top_k)(PRE, K), atol=0, rtol=0)


def test_circuit_tracer_keeps_values_as_they_are_and_so_do_transcoders(tmp_path):
    python = require("circuit-tracer")
    save_file({"pre": PRE, "threshold": THRESHOLD}, str(tmp_path / "in.safetensors"))
    script = (
        "import sys\n"
        "from safetensors.torch import load_file, save_file\n"
        "from circuit_tracer.transcoder.activation_functions import JumpReLU, TopK\n"
        "t = load_file(sys.argv[1])\n"
        f"out = {{'topk': TopK({K})(t['pre']), 'jumprelu': JumpReLU(t['threshold'], 0.1)(t['pre']).detach()}}\n"
        "save_file({k: v.contiguous() for k, v in out.items()}, sys.argv[2])\n"
    )
    subprocess.run(
        [str(python), "-c", script, str(tmp_path / "in.safetensors"), str(tmp_path / "out.safetensors")],
        check=True,
        capture_output=True,
        timeout=600,
    )
    reference = load_file(str(tmp_path / "out.safetensors"))
    assert (reference["topk"] < 0).any() and (reference["jumprelu"] < 0).any()  # the inputs tell them apart
    eye, zeros = torch.eye(D)[None], torch.zeros(1, D)
    topk = TranscoderSet(eye, eye, zeros, zeros, activation="topk", k=K)
    torch.testing.assert_close(topk.encode(PRE, 0)[1], reference["topk"], atol=0, rtol=0)
    jump = TranscoderSet(eye, eye, zeros, zeros, activation="jumprelu", threshold=THRESHOLD[None])
    torch.testing.assert_close(jump.encode(PRE, 0)[1], reference["jumprelu"], atol=0, rtol=0)


def _saelens(folder, architecture, **fields):
    folder.mkdir(parents=True)
    meta = {"hook_name": "blocks.0.hook_resid_post", "sae_lens_version": "6.5.0"}
    cfg = {"architecture": architecture, "d_in": D, "d_sae": D, "dtype": "float32", "metadata": meta}
    cfg.update(apply_b_dec_to_input=False, **fields)
    (folder / "cfg.json").write_text(json.dumps(cfg))
    w = {"W_enc": torch.eye(D), "b_enc": torch.zeros(D), "W_dec": torch.eye(D), "b_dec": torch.zeros(D)}
    if architecture == "jumprelu":
        w["threshold"] = THRESHOLD
    save_file(w, str(folder / "sae_weights.safetensors"))
    return sae_lib.load(folder)


def test_saelens_topk_and_jumprelu_rectify_the_values_they_keep(tmp_path):
    topk = _saelens(tmp_path / "topk", "topk", k=K)
    torch.testing.assert_close(topk.encode(PRE), _relu_top_k(PRE, K), atol=0, rtol=0)
    jump = _saelens(tmp_path / "jump", "jumprelu")
    torch.testing.assert_close(jump.encode(PRE), PRE.relu() * (PRE > THRESHOLD), atol=0, rtol=0)


def test_sparsify_rectifies_before_its_top_k(tmp_path):
    folder = tmp_path / "layers.0.mlp"
    folder.mkdir()
    cfg = {"d_in": D, "k": K, "num_latents": D, "expansion_factor": 1, "transcode": True}
    (folder / "cfg.json").write_text(json.dumps(cfg))
    weights = {"encoder.weight": torch.eye(D), "encoder.bias": torch.zeros(D)}
    save_file({**weights, "W_dec": torch.eye(D), "b_dec": torch.zeros(D)}, str(folder / "sae.safetensors"))
    sae = sae_lib.load(
        folder, hook_name="blocks.0.ln2.hook_normalized", hook_name_out="blocks.0.hook_mlp_out"
    )
    values, indices = PRE.relu().topk(K, dim=-1)  # sparsify: relu, then the top k
    torch.testing.assert_close(
        sae.encode(PRE), torch.zeros_like(PRE).scatter(-1, indices, values), atol=0, rtol=0
    )


def test_gemma_scope_jumprelu_rectifies(tmp_path):
    w = {"W_enc": np.eye(D), "b_enc": np.zeros(D), "W_dec": np.eye(D), "b_dec": np.zeros(D)}
    np.savez(
        tmp_path / "params.npz",
        **{k: v.astype(np.float32) for k, v in w.items()},
        threshold=THRESHOLD.numpy(),
    )
    sae = sae_lib.load(tmp_path / "params.npz", hook_name="blocks.0.hook_resid_post")
    torch.testing.assert_close(sae.encode(PRE), (PRE > THRESHOLD) * PRE.relu(), atol=0, rtol=0)
