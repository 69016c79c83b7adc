"""Gemma Scope 2 per-layer files written here are read by the format's reference loader, circuit-tracer's
``load_gemma_scope_2_transcoder``, run live in circuit-tracer's own environment (``tests/reference_envs.py``):
what circuit-tracer's transcoders compute from the written files is what interp's set computes.

(SAELens reads the same files too, but only from the hub by release name; circuit-tracer's loader takes a path.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from interp.sae.formats import gemma_scope_2
from tests.reference_envs import require
from tests.sae.transcoder.factories import random_set

READER = Path(__file__).resolve().parent / "circuit_tracer_reader.py"
GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "gemma_scope_2"
EPS = torch.finfo(torch.float32).eps


def _circuit_tracer_reads(x: torch.Tensor, tmp_path: Path, *folders: Path) -> list[dict[str, torch.Tensor]]:
    """What circuit-tracer's transcoders loaded from each folder compute on ``x``, one dict per folder."""
    save_file({"x": x.contiguous()}, str(tmp_path / "x.safetensors"))
    out = tmp_path / "circuit_tracer.safetensors"
    command = [str(require("circuit-tracer")), str(READER), str(tmp_path / "x.safetensors"), str(out)]
    result = subprocess.run([*command, *map(str, folders)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    read = load_file(str(out))
    return [
        {k.split("/")[1]: v for k, v in read.items() if k.startswith(f"{f}/")} for f in range(len(folders))
    ]


def _bound(x: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
    """Float32 rounding of ``x @ W`` summed over ``d_model`` terms, in any order: ``eps * d * sum |x_i W_ij|``
    per output (the worst case of a sum of ``d`` terms), for each weight matrix applied in turn."""
    bound = 0.0
    for w in weights:
        bound = bound + EPS * x.shape[-1] * (x.abs() @ w.abs())
    return bound


def test_a_set_written_here_computes_the_same_in_circuit_tracer(tmp_path):
    sites = dict(
        input_site="hook_resid_mid", output_site="hook_mlp_out"
    )  # what Gemma Scope 2 reads and writes
    tc = random_set(3, d_model=8, d_tc=16, seed=11, skip=True, activation="jumprelu", **sites)
    written = gemma_scope_2.save(tc, tmp_path / "set")
    assert sorted(written) == [0, 1, 2]
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(12))  # [layer, pos, d_model]
    [theirs] = _circuit_tracer_reads(x, tmp_path, tmp_path / "set")
    for i in range(3):
        pre, acts = tc.encode(x[i], i)
        # the encoder: x @ W_enc.T + b_enc, eight terms per feature
        tol = _bound(x[i], tc.W_enc[i].T) + EPS * tc.b_enc[i].abs()
        assert bool(((pre - theirs[f"pre_{i}"]).abs() <= tol).all()), i
        # JumpReLU keeps a pre-activation above its threshold; the two sides agree on which (away from it)
        assert bool(((acts > 0) == (theirs[f"acts_{i}"] > 0)).all()) and bool((acts > 0).any()), i
        assert bool(((acts - theirs[f"acts_{i}"]).abs() <= tol).all()), i
    recons = tc.reconstruct({i: x[i] for i in range(3)})
    for i in range(3):
        acts = theirs[f"acts_{i}"]
        # decoder and skip: acts @ W_dec + x @ W_skip + b_dec, with the encoder's rounding carried through
        carried = (tc.encode(x[i], i)[1] - acts).abs() @ tc.W_dec[i].abs()
        tol = (
            _bound(acts, tc.W_dec[i])
            + _bound(x[i], tc.W_skip[i].T)
            + 3 * EPS * tc.b_dec[i].abs()
            + 2 * carried
        )
        assert bool(((recons[i] - theirs[f"recons_{i}"]).abs() <= tol + EPS * recons[i].abs()).all()), i


def test_a_published_file_rewritten_here_reads_in_circuit_tracer_as_the_original(tmp_path):
    """The golden files are in the published layout; read here and written again, circuit-tracer computes the
    very same numbers from them as from the originals in the same run (the same code on the same values, to the
    bit). (``test_formats.py`` compares interp's own reading of both with the golden's numbers.)"""
    from interp.sae import load_transcoders

    files = {i: GOLDEN / f"layer_{i}.safetensors" for i in range(3)}
    tc = load_transcoders(files, input_hook="hook_resid_mid", output_hook="hook_mlp_out")
    gemma_scope_2.save(tc, tmp_path / "set")
    expected = load_file(str(GOLDEN / "expected.safetensors"))
    original, rewritten = _circuit_tracer_reads(expected["x"], tmp_path, GOLDEN, tmp_path / "set")
    assert sorted(rewritten) == sorted(original) == sorted(k for k in expected if k != "x")
    for key, value in rewritten.items():
        assert torch.equal(value, original[key]), key
