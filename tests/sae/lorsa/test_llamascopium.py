"""llamascopium's folders (OpenMOSS, formerly lm-saes) read by ``interp.sae.load`` compute what llamascopium
computes from them, for every setting its Lorsa, transcoder, SAE and CLT configs save.

llamascopium runs live in its own environment (:mod:`tests.reference_envs`, ``llamascopium``): it makes each
dictionary with drawn weights, saves it with its ``save_pretrained``, reads it back with ``from_pretrained`` in
float32 and in float64, and writes what it computes on drawn inputs (``llamascopium_run.py``): the output in the
model's units (the input times llamascopium's scale factor, its forward, divided by the output's factor) and the
activations, pre-activations and, for a Lorsa, the attention pattern. The golden is its float64 run; interp's
float32 values must stay within twice llamascopium's own float32 rounding of it (docs/development.md,
"Tolerances"), and the heads or features active must be the same ones.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import interp.sae
from interp.sae import SAE, CrossLayerTranscoder, SAEFormatError, TranscoderSet
from interp.sae.formats import llamascopium_lorsa
from interp.sae.lorsa import Lorsa
from tests.reference_envs import require
from tests.tolerance import assert_within, float32_rounding

RUN = Path(__file__).resolve().parent / "llamascopium_run.py"
L_IN, L_OUT = "blocks.1.ln1.hook_normalized", "blocks.1.hook_attn_out"
NORMS = {L_IN: 3.0, L_OUT: 0.5}  # the dataset's average norms: the scale factors are far from one

LORSA = dict(sae_type="lorsa", d_model=8, hook_point_in=L_IN, hook_point_out=L_OUT, n_ctx=16)
LORSA_CASES = {
    # top-k chosen by z * |W_O|, GPT-J's adjacent rotary pairs (llamascopium's defaults), trained on scaled data
    "topk_gated_adjacent": dict(
        LORSA, expansion_factor=1.5, n_qk_heads=3, d_qk_head=4, rotary_dim=4, top_k=3
    ),
    # GPT-NeoX's halves, two of four dimensions rotating, the post-QK RMS norm, already in the model's units
    "topk_halves_partial_qknorm": dict(
        LORSA,
        expansion_factor=1.0,
        n_qk_heads=2,
        d_qk_head=4,
        rotary_dim=2,
        rotary_adjacent_pairs=False,
        use_post_qk_ln=True,
        normalization_type="RMS",
        eps=1e-5,
        top_k=2,
        sparsity_include_decoder_norm=False,
        norm_activation="inference",
    ),
    "jumprelu_gated": dict(
        LORSA, expansion_factor=1.0, n_qk_heads=4, d_qk_head=4, rotary_dim=4, act_fn="jumprelu"
    ),
    "jumprelu_ungated_no_bias": dict(
        LORSA,
        expansion_factor=1.0,
        n_qk_heads=2,
        d_qk_head=4,
        rotary_dim=4,
        act_fn="jumprelu",
        sparsity_include_decoder_norm=False,
        use_decoder_bias=False,
    ),
    "relu_no_positions": dict(
        LORSA,
        expansion_factor=0.5,
        n_qk_heads=2,
        d_qk_head=4,
        rotary_dim=4,
        positional_embedding_type="none",
        act_fn="relu",
    ),
    # Llama 3.1's frequency bands (rotary_dim 6 has one high, one middle and one low frequency at these
    # wavelengths), each dimension repeated twice before rotating, an explicit score scale, BatchTopK
    "batchtopk_llama3_rope_scaled": dict(
        LORSA,
        expansion_factor=1.5,
        n_qk_heads=4,
        d_qk_head=6,
        rotary_dim=6,
        rotary_base=500,
        rotary_scale=2,
        use_NTK_by_parts_rope=True,
        NTK_by_parts_factor=8.0,
        NTK_by_parts_low_freq_factor=1.0,
        NTK_by_parts_high_freq_factor=4.0,
        old_context_len=256,
        attn_scale=3.0,
        act_fn="batchtopk",
        top_k=2,
    ),
    "fewer_qk_heads_stored": dict(
        LORSA, expansion_factor=1.0, n_qk_heads=4, d_qk_head=4, rotary_dim=4, top_k=2
    ),
}

T_IN, T_OUT = "blocks.2.ln2.hook_normalized", "blocks.2.hook_mlp_out"
TRANSCODER = dict(sae_type="sae", d_model=8, expansion_factor=2.0, hook_point_in=T_IN, hook_point_out=T_OUT)
SAE_HOOK = "blocks.0.hook_resid_post"
SAE_CFG = dict(
    sae_type="sae", d_model=8, expansion_factor=2.0, hook_point_in=SAE_HOOK, hook_point_out=SAE_HOOK
)
CLT_HOOKS = dict(
    hook_points_in=[f"blocks.{i}.ln2.hook_normalized" for i in range(3)],
    hook_points_out=[f"blocks.{i}.hook_mlp_out" for i in range(3)],
)
CLT = dict(sae_type="clt", d_model=8, expansion_factor=2.0, **CLT_HOOKS)
OTHER_CASES = {
    "transcoder_topk_gated": dict(TRANSCODER, act_fn="topk", top_k=3),
    "transcoder_jumprelu_ungated": dict(
        TRANSCODER, act_fn="jumprelu", sparsity_include_decoder_norm=False, norm_activation="inference"
    ),
    "transcoder_batchtopk_relu": dict(TRANSCODER, act_fn="batchtopk", top_k=3),
    "sae_topk_gated": dict(SAE_CFG, act_fn="topk", top_k=3),
    "sae_jumprelu_gated": dict(SAE_CFG, act_fn="jumprelu"),
    "clt_topk_gated": dict(CLT, act_fn="topk", top_k=3),
    "clt_jumprelu_gated": dict(CLT, act_fn="jumprelu", norm_activation="inference"),
    "clt_relu_ungated_no_bias": dict(
        CLT, act_fn="relu", sparsity_include_decoder_norm=False, use_decoder_bias=False
    ),
    "clt_batchtopk": dict(CLT, act_fn="batchtopk", top_k=3),
}


def _norms(config: dict) -> dict | None:
    if config.get("norm_activation", "dataset-wise") != "dataset-wise":
        return None
    if config["sae_type"] == "clt":
        values = [2.0, 3.0, 4.0, 0.5, 0.7, 1.5]
        return dict(zip(config["hook_points_in"] + config["hook_points_out"], values, strict=True))
    if config["hook_point_in"] == config["hook_point_out"]:
        return {config["hook_point_in"]: 3.0}
    return {config["hook_point_in"]: 3.0, config["hook_point_out"]: 0.5}


def _shape(config: dict) -> list[int]:
    return {"lorsa": [2, 7], "sae": [11], "clt": [11]}[config["sae_type"]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """``(folders, results)``: each case's folder as llamascopium saved it, and what it computed."""
    python = require("llamascopium")
    root = tmp_path_factory.mktemp("llamascopium")
    cases = []
    for seed, (name, config) in enumerate({**LORSA_CASES, **OTHER_CASES}.items()):
        case = dict(name=name, folder=str(root / name), config=config, seed=100 + seed, shape=_shape(config))
        case["norms"] = _norms(config)
        if name == "fewer_qk_heads_stored":
            case["stored_qk_heads"] = 2  # saved with two QK heads; the config asks for four
        cases.append(case)
    (root / "spec.json").write_text(json.dumps(cases))
    out = root / "out.safetensors"
    result = subprocess.run(
        [str(python), "-W", "ignore", str(RUN), str(root / "spec.json"), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {case["name"]: Path(case["folder"]) for case in cases}, load_file(str(out))


def _theirs(results: dict, name: str) -> tuple[torch.Tensor, dict, dict]:
    pick = {k.removeprefix(f"{name}/"): v for k, v in results.items() if k.startswith(f"{name}/float")}
    f32 = {k.removeprefix("float32/"): v for k, v in pick.items() if k.startswith("float32/")}
    f64 = {k.removeprefix("float64/"): v for k, v in pick.items() if k.startswith("float64/")}
    return results[f"{name}/x"], f32, f64


def _close(ours: torch.Tensor, f32: torch.Tensor, f64: torch.Tensor, what: str) -> None:
    """``ours`` within twice llamascopium's float32 rounding of its float64 value."""
    assert_within(ours, f64, 2 * float32_rounding(f32, f64), what)


def _same_active(ours: torch.Tensor, theirs: torch.Tensor, what: str) -> None:
    active = theirs != 0
    assert torch.equal(ours != 0, active), f"{what}: other features active"
    assert bool(active.any()) and not bool(active.all()), f"{what}: a case should have some features off"


@pytest.mark.parametrize("name", list(LORSA_CASES))
def test_a_lorsa_folder_computes_what_llamascopium_computes(reference, name):
    folders, results = reference
    lorsa = interp.sae.load(folders[name])
    assert isinstance(lorsa, Lorsa) and lorsa.layers == [1]
    assert (lorsa.input_hook(1), lorsa.output_hook(1)) == (L_IN, L_OUT)
    x, f32, f64 = _theirs(results, name)
    with torch.no_grad():
        pre, acts = lorsa.encode(x, 1)
        out = lorsa.reconstruct({1: x})[1]
        pattern = lorsa.pattern(x, 1)
    # the fused kernel and the explicit path choose the same heads in llamascopium too
    _same_active(f32["acts_fused"], f64["acts"], f"{name} fused")
    _same_active(acts, f64["acts"], name)
    _close(pattern, f32["pattern"], f64["pattern"], f"{name} pattern")
    _close(pre, f32["pre"], f64["pre"], f"{name} pre-activations")
    _close(acts, f32["acts"], f64["acts"], f"{name} activations")
    _close(out, f32["out"], f64["out"], f"{name} output")
    # in float64 interp agrees with llamascopium's float64 run to float32's resolution of the values: only the
    # rotary tables (float32 angles, the model's own convention) are computed at float32 there
    double = interp.sae.load(folders[name], dtype=torch.float64)
    with torch.no_grad():
        out64 = double.reconstruct({1: x.double()})[1]
    assert_within(out64, f64["out"], float32_rounding(f32["out"], f64["out"]), f"{name} float64 output")


def _gating_norm(folder: Path, config: dict) -> torch.Tensor:
    """llamascopium's decoder norm per feature (``[d_sae]``; a CLT's ``[n_layers, d_sae]`` over every layer a
    feature writes), or ones where it does not gate by it."""
    tensors = load_file(str(folder / "sae_weights.safetensors"))
    if not config.get("sparsity_include_decoder_norm", True):
        n = int(config["d_model"] * config["expansion_factor"])
        return torch.ones(len(config.get("hook_points_in", [0])), n).squeeze(0)
    if config["sae_type"] == "clt":
        n_layers = len(config["hook_points_in"])
        squares = [
            sum(tensors[f"W_D.{to}"][i].double().pow(2).sum(-1) for to in range(i, n_layers))
            for i in range(3)
        ]
        return torch.stack(squares).sqrt()
    return tensors["W_D"].double().norm(dim=-1)


def _f_in(config: dict) -> torch.Tensor:
    """The factors llamascopium multiplied the inputs by (``[n_layers]`` for a CLT)."""
    norms = _norms(config)
    hooks = config.get("hook_points_in", [config.get("hook_point_in")])
    values = [math.sqrt(config["d_model"]) / norms[h] if norms else 1.0 for h in hooks]
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize("name", list(OTHER_CASES))
def test_a_transcoder_sae_or_clt_folder_computes_what_llamascopium_computes(reference, name):
    folders, results = reference
    config = OTHER_CASES[name]
    found = interp.sae.load(folders[name])
    x, f32, f64 = _theirs(results, name)
    # interp's activations are llamascopium's inference-mode ones (divided by f_in) times the decoder norm where
    # features are chosen by it (module docstring of interp.sae.formats.llamascopium)
    norm, f_in = _gating_norm(folders[name], config), _f_in(config)
    with torch.no_grad():
        if config["sae_type"] == "clt":
            assert isinstance(found, CrossLayerTranscoder) and found.layers == [0, 1, 2]
            acts = torch.stack(
                [found.encode(x[:, i], i)[1] for i in range(3)], dim=1
            )  # [tokens, layer, d_sae]
            outs = found.reconstruct({i: x[:, i] for i in range(3)})
            out = torch.stack([outs[i] for i in range(3)])  # [layer, tokens, d_model]
            scale = norm / f_in[:, None]
        elif config["hook_point_in"] == config["hook_point_out"]:
            assert isinstance(found, SAE) and found.cfg.hook_name == SAE_HOOK
            acts, out = found.encode(x), found(x)
            scale = norm / f_in
        else:
            assert isinstance(found, TranscoderSet) and found.layers == [2]
            assert (found.input_hook(2), found.output_hook(2)) == (T_IN, T_OUT)
            acts, out = found.encode(x, 2)[1], found.reconstruct({2: x})[2]
            scale = norm / f_in
    _same_active(acts, f64["acts"], name)
    _close(acts, f32["acts"] * scale, f64["acts"] * scale, f"{name} activations")
    _close(out, f32["out"], f64["out"], f"{name} output")


def test_a_lorsa_written_by_interp_reads_in_llamascopium_as_it_reads_here(reference, tmp_path):
    """interp's writer: a folder llamascopium loads strictly (every buffer it asks for) and runs as interp does,
    in the rotate-half layout whatever layout the weights came in."""
    folders, _ = reference
    results = {}
    specs = []
    for name in ("topk_gated_adjacent", "batchtopk_llama3_rope_scaled", "jumprelu_ungated_no_bias"):
        lorsa = interp.sae.load(folders[name])
        [written] = llamascopium_lorsa.save(lorsa, tmp_path / name)
        again = interp.sae.load(written)
        for key, value in lorsa.state_dict().items():
            assert torch.equal(value, again.state_dict()[key]), (name, key)
        results[name] = lorsa
        specs.append(name)
    x = torch.randn(2, 7, 8, generator=torch.Generator().manual_seed(5))
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, torch\n"
        "from safetensors.torch import load_file, save_file\n"
        "from llamascopium.models.sparse_dictionary import SparseDictionary\n"
        "x = load_file(sys.argv[1])['x']\n"
        "out = {}\n"
        "for folder in sys.argv[3:]:\n"
        "    m = SparseDictionary.from_pretrained(folder)\n"
        "    with torch.no_grad():\n"
        "        out[folder.rsplit('/', 1)[-1]] = m.decode(m.encode(x))\n"
        "save_file(out, sys.argv[2])\n"
    )
    save_file({"x": x}, str(tmp_path / "x.safetensors"))
    command = [str(require("llamascopium")), "-W", "ignore", str(script), str(tmp_path / "x.safetensors")]
    command += [str(tmp_path / "theirs.safetensors"), *(str(tmp_path / name) for name in specs)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = load_file(str(tmp_path / "theirs.safetensors"))
    for name, lorsa in results.items():
        with torch.no_grad():
            ours = lorsa.reconstruct({1: x})[1]
            exact = lorsa.double().reconstruct({1: x.double()})[1]
        assert_within(theirs[name], exact, 2 * float32_rounding(ours, exact), name)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(norm_activation="token-wise"), "norm_activation='token-wise'"),
        (dict(act_fn="layertopk"), "chooses features across layers"),
        (dict(sae_type="crosscoder"), "sae_type='crosscoder'"),
        (dict(use_post_qk_ln=True, normalization_type="LN"), "normalization_type='LN'"),
    ],
)
def test_settings_interp_cannot_express_are_refused_in_one_line(reference, tmp_path, change, message):
    folders, _ = reference
    source = folders["topk_gated_adjacent"] if "sae_type" in change or "qk" in str(change) else None
    source = source or folders["clt_topk_gated"]
    if "norm_activation" in change:
        source = folders["transcoder_topk_gated"]
    target = tmp_path / "folder"
    target.mkdir()
    config = json.loads((source / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, **change}))
    (target / "sae_weights.safetensors").write_bytes((source / "sae_weights.safetensors").read_bytes())
    with pytest.raises(SAEFormatError) as err:
        interp.sae.load(target)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_llamascopium_s_own_folding_misses_three_cases_that_interp_folds(reference, tmp_path):
    """What interp.sae.formats.llamascopium's docstring says of llamascopium's ``fold_activation_scale``: it
    leaves an SAE's and a gated Lorsa's JumpReLU thresholds unscaled and changes a gated CLT's decoder norms
    unevenly, so that its folded dictionary computes another function than the one trained (interp's, tested
    above, computes the trained one)."""
    folders, results = reference
    cases = []
    for name in ("sae_jumprelu_gated", "jumprelu_gated", "clt_topk_gated"):
        x = results[f"{name}/x"]
        if name == "sae_jumprelu_gated":
            x = x * 3.0  # inputs of the size the dataset's norm says, so that thresholds matter
        save_file({"x": x.contiguous()}, str(tmp_path / f"{name}.safetensors"))
        cases.append({"name": name, "folder": str(folders[name]), "x": str(tmp_path / f"{name}.safetensors")})
    (tmp_path / "spec.json").write_text(json.dumps(cases))
    script = Path(__file__).resolve().parent / "llamascopium_fold.py"
    command = [str(require("llamascopium")), "-W", "ignore", str(script), str(tmp_path / "spec.json")]
    result = subprocess.run(
        [*command, str(tmp_path / "out.json")], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name, (difference, largest) in json.loads((tmp_path / "out.json").read_text()).items():
        assert difference > 0.01 * largest, (name, difference, largest)
