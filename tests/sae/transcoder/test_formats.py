"""Each transcoder format read gives what circuit-tracer 0.5.0's own loader gives for the same files, and files
written here hold the tensors circuit-tracer's writer wrote (so they load there as they load here).

The golden folders and ``expected.safetensors`` (circuit-tracer's encoder outputs and reconstructions on fixed
inputs) are written by ``tests/sae/golden/make_golden.py`` in circuit-tracer's own environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from interp.sae import CrossLayerTranscoder, SAEFormatError, TranscoderSet, load_transcoders, save_transcoders
from interp.sae.formats import gemma_scope_2

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
SETS = ["circuit_tracer_relu_skip", "circuit_tracer_jumprelu", "circuit_tracer_topk"]
CLTS = ["circuit_tracer_clt_relu", "circuit_tracer_clt_jumprelu"]


def _check_against(tc, expected: dict[str, torch.Tensor]) -> None:
    x = expected["x"]  # [n_layers, n_pos, d_model]
    for i in range(x.shape[0]):
        pre, acts = tc.encode(x[i], i)
        torch.testing.assert_close(pre, expected[f"pre_{i}"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(acts, expected[f"acts_{i}"], rtol=1e-5, atol=1e-5)
    outs = tc.reconstruct({i: x[i] for i in range(x.shape[0])})
    for i, out in outs.items():
        torch.testing.assert_close(out, expected[f"recons_{i}"], rtol=1e-5, atol=1e-5)


def _same_files(a: Path, b: Path, pattern: str) -> None:
    names = sorted(p.name for p in a.glob(pattern))
    assert names and names == sorted(p.name for p in b.glob(pattern))
    for name in names:
        left, right = load_file(str(a / name)), load_file(str(b / name))
        assert sorted(left) == sorted(right), name
        for key in left:
            assert torch.equal(left[key], right[key]), (name, key)


@pytest.mark.parametrize("name", SETS)
def test_circuit_tracer_sets_read_and_write_as_circuit_tracer_does(name, tmp_path):
    folder = GOLDEN / name
    tc = load_transcoders(folder)
    assert isinstance(tc, TranscoderSet) and tc.layers == [0, 1, 2]
    assert (tc.input_site, tc.output_site) == ("mlp.hook_in", "mlp.hook_out")
    assert tc.has_skip == name.endswith("skip")
    _check_against(tc, load_file(str(folder / "expected.safetensors")))
    save_transcoders(tc, tmp_path / "out")
    _same_files(folder, tmp_path / "out", "layer_*.safetensors")
    again = load_transcoders(tmp_path / "out")
    assert (again.activation, again.k) == (tc.activation, tc.k)
    _check_against(again, load_file(str(folder / "expected.safetensors")))


@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("name", CLTS)
def test_circuit_tracer_clts_read_lazily_and_write_as_circuit_tracer_does(name, lazy, tmp_path):
    folder = GOLDEN / name
    clt = load_transcoders(folder, lazy=lazy)
    assert isinstance(clt, CrossLayerTranscoder) and clt.lazy == lazy and clt.n_layers == 3
    assert (clt.input_site, clt.output_site) == ("hook_resid_mid", "hook_mlp_out")
    _check_against(clt, load_file(str(folder / "expected.safetensors")))
    rows = clt.decoder(1, torch.tensor([5, 0, 5]))
    assert torch.equal(rows, load_file(str(folder / "W_dec_1.safetensors"))["W_dec_1"][[5, 0, 5]])
    save_transcoders(clt, tmp_path / "out")
    _same_files(folder, tmp_path / "out", "W_*.safetensors")
    _check_against(load_transcoders(tmp_path / "out"), load_file(str(folder / "expected.safetensors")))


def test_gemma_scope_params_npz_transcoders():
    folder = GOLDEN / "gemma_scope"
    tc = load_transcoders({i: folder / f"layer_{i}" / "params.npz" for i in range(3)})
    assert (tc.activation, tc.input_site, tc.output_site) == (
        "jumprelu",
        "ln2.hook_normalized",
        "hook_mlp_out",
    )
    _check_against(tc, load_file(str(folder / "expected.safetensors")))


def test_gemma_scope_2_transcoders_and_clt(tmp_path):
    folder = GOLDEN / "gemma_scope_2"
    files = {i: folder / f"layer_{i}.safetensors" for i in range(3)}
    tc = load_transcoders(files, input_hook="hook_resid_mid", output_hook="hook_mlp_out")
    assert isinstance(tc, TranscoderSet) and tc.has_skip
    _check_against(tc, load_file(str(folder / "expected.safetensors")))
    written = gemma_scope_2.save(tc, tmp_path / "set")
    assert written == {i: tmp_path / "set" / f"layer_{i}.safetensors" for i in range(3)}
    _same_files(folder, tmp_path / "set", "layer_*.safetensors")  # every tensor, value for value
    again = load_transcoders(written, input_hook="hook_resid_mid", output_hook="hook_mlp_out")
    _check_against(again, load_file(str(folder / "expected.safetensors")))
    folder = GOLDEN / "gemma_scope_2_clt"
    files = {i: folder / f"layer_{i}.safetensors" for i in range(3)}
    clt = load_transcoders(files, input_hook="hook_resid_mid", output_hook="hook_mlp_out")
    assert isinstance(clt, CrossLayerTranscoder)
    _check_against(clt, load_file(str(folder / "expected.safetensors")))
    save_transcoders(clt, tmp_path / "clt", format="gemma_scope_2")
    _same_files(folder, tmp_path / "clt", "layer_*.safetensors")


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for file in src.iterdir():
        (dst / file.name).write_bytes(file.read_bytes())
    return dst


def test_bad_files_are_refused_with_one_line_naming_them(tmp_path):
    folder = _copy(GOLDEN / "circuit_tracer_jumprelu", tmp_path / "set")
    (folder / "config.yaml").write_text("model_kind: sparse_thing\nfeature_input_hook: mlp.hook_in\n")
    with pytest.raises(SAEFormatError, match="model_kind='sparse_thing'; expected one of"):
        load_transcoders(folder)
    config = (
        "model_kind: transcoder_set\nfeature_input_hook: mlp.hook_in\nfeature_output_hook: mlp.hook_out\n"
    )
    (folder / "config.yaml").write_text(config + "activation: gelu\n")
    with pytest.raises(SAEFormatError, match="activation='gelu'; expected one of"):
        load_transcoders(folder)
    (folder / "config.yaml").write_text(config.replace("mlp.hook_in", "blocks.hook_x"))
    with pytest.raises(SAEFormatError, match="feature_input_hook='blocks.hook_x'; expected one of"):
        load_transcoders(folder)
    (folder / "config.yaml").write_text(config + "transcoders:\n- hf://org/repo/layer_0.safetensors\n")
    with pytest.raises(SAEFormatError, match="nothing is downloaded here"):
        load_transcoders(folder)
    clt = _copy(GOLDEN / "circuit_tracer_clt_relu", tmp_path / "clt")
    (clt / "W_dec_1.safetensors").unlink()
    with pytest.raises(SAEFormatError, match="W_dec_1.safetensors is missing; a CLT over 3 layers"):
        load_transcoders(clt)
    save_file({"W_dec_1": torch.zeros(16, 3, 8)}, str(clt / "W_dec_1.safetensors"))
    with pytest.raises(SAEFormatError, match=r"W_dec_1 has shape \[16, 3, 8\]; expected \[16, 2, 8\]"):
        load_transcoders(clt)
