"""GGUF files written by llama.cpp's own converter, read by ``interp.load`` and compared with ``transformers``.

For each architecture a tiny random checkpoint is saved as a Hugging Face folder (``tests/load/gguf_models.py``)
and converted by ``convert_hf_to_gguf.py`` from the pinned llama-cpp-python release (``tests/load/llama_cpp.py``
fetches it once). The GGUF file must load to the model ``transformers`` runs from the folder: logits, every
pattern (``output_attentions`` under eager) and every ``hook_resid_pre``, on a padded batch longer than the
sliding windows; to the same config and weights as the folder; and its rebuilt tokenizer must give the
folder's ids, offsets and text. The conventions of llama.cpp's converter that the loader undoes are asserted on
the files themselves, so a converter release that changed one would fail here by name.
"""

from __future__ import annotations

import gguf
import pytest
import torch
from einops import rearrange

from interp.load import load, load_checkpoint
from interp.load.gguf_file import GGUFFile
from interp.load.gguf_hf import unpermute_rotary_rows
from interp.model.positional import scaled_frequencies
from tests.load import gguf_models
from tests.load.builders import needs_smollm
from tests.load.llama_cpp import Unavailable, convert, converter_dir, required
from tests.load.test_families import _compare

pytestmark = [pytest.mark.slow, needs_smollm]

NAMES = sorted(gguf_models.MODELS)
STRINGS = [
    "The animal didn't cross the street because it was too tired",
    "Numbers 12345 and 3.14159, x1y22",
    "  leading spaces\tand\t\ttabs\n\nnewlines   ",
    " x",
    "a  b   c",
    "café naïve Ångström",
    "日本語のテキスト",
    "emoji 😀👍🏽 done",
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """name -> (reference model, folder, GGUF file), every file from one run of the converter."""
    try:
        converter_dir()
    except Unavailable as err:
        if required():
            pytest.fail(f"llama.cpp's converter is not available, and CI needs it: {err}")
        pytest.skip(f"llama.cpp's converter is not available: {err}")
    root = tmp_path_factory.mktemp("llama_cpp")
    tokenizers = {
        "smollm": gguf_models.smollm_tokenizer(root / "smollm"),
        "gemma-spm": gguf_models.sentencepiece_tokenizer("gemma", root / "gemma-spm"),
        "llama-spm": gguf_models.sentencepiece_tokenizer("llama", root / "llama-spm"),
    }
    models = {}
    for name in NAMES:
        reference = gguf_models.build(name)
        folder = gguf_models.save(name, reference, tokenizers[gguf_models.MODELS[name][1]], root / name)
        models[name] = (gguf_models.reference(name, reference, folder), folder, root / f"{name}.gguf")
    convert([(folder, gguf) for _, folder, gguf in models.values()])
    return models


class _Lazy(dict):
    """name -> value, computed on first use: parsing a GGUF file's 49,152-token metadata takes seconds."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, name):
        self[name] = self.make(name)
        return self[name]


@pytest.fixture(scope="module")
def checkpoints(converted):
    """name -> load_checkpoint of the GGUF file (no cache)."""
    return _Lazy(lambda name: load_checkpoint(converted[name][2], use_cache=False))


@pytest.fixture(scope="module")
def files(converted):
    """name -> the open GGUF file."""
    return _Lazy(lambda name: GGUFFile(converted[name][2]))


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INTERP_CACHE", str(tmp_path_factory.mktemp("interp_cache")))
        yield


@pytest.mark.parametrize("name", NAMES)
def test_gguf_matches_transformers_on_the_folder(name, converted, files):
    reference, _, gguf = converted[name]
    assert files[name].architecture == gguf_models.MODELS[name][2]
    model = load(gguf)
    _compare(model, reference, "right")
    _compare(model, reference, "left")
    cached = load(gguf)  # the second load comes from the dequantized cache
    for (key, value), again in zip(model.state_dict().items(), cached.state_dict().values(), strict=True):
        torch.testing.assert_close(value, again, atol=0, rtol=0, msg=key)


@pytest.mark.parametrize("name", NAMES)
def test_gguf_and_folder_load_the_same_model(name, converted, checkpoints):
    _, folder, _ = converted[name]
    cfg, state, _ = checkpoints[name]
    folder_cfg, folder_state, _ = load_checkpoint(folder)
    frequencies = [
        scaled_frequencies(c.rotary_base, c.rotary_dim, c.rotary_scaling, c.n_ctx, seq_len)
        for c in (cfg, folder_cfg)
        for seq_len in (4, c.n_ctx)
    ]
    for ours, theirs in zip(frequencies[:2], frequencies[2:], strict=True):
        torch.testing.assert_close(ours[0], theirs[0], atol=0, rtol=1e-6)  # inverse frequencies
        assert ours[1] == pytest.approx(theirs[1], rel=1e-6)  # attention factor
    if name == "llama3":  # the file stores Llama 3.1's rule as its per-frequency divisors
        assert cfg.rotary_scaling.kind == "factors" and folder_cfg.rotary_scaling.kind == "llama3"
        cfg = cfg.replace(rotary_scaling=folder_cfg.rotary_scaling)
    assert cfg.replace(name=None) == folder_cfg.replace(name=None)
    assert state.keys() == folder_state.keys()
    for key, value in state.items():
        torch.testing.assert_close(value, folder_state[key], atol=1e-6, rtol=0, msg=key)


@pytest.mark.parametrize("name", NAMES)
def test_tokenizer_matches_the_folder(name, converted, checkpoints):
    _, folder, _ = converted[name]
    _, _, ours = checkpoints[name]
    _, _, theirs = load_checkpoint(folder)
    specials = ours.backend.id_to_token(ours.eos_id), ours.backend.id_to_token(ours.bos_id)
    texts = [*STRINGS, f"{specials[0]} in the middle {specials[1]}x"]
    assert ours.prepends_bos == theirs.prepends_bos
    for text in texts:
        got, want = ours.to_tokens(text), theirs.to_tokens(text)
        assert got.ids.tolist() == want.ids.tolist(), text
        assert got.offsets.tolist() == want.offsets.tolist(), text
        assert ours.decode(got.ids[0]) == theirs.decode(want.ids[0]), text


@pytest.mark.parametrize("name", ["gemma", "gemma2", "phi3", "qwen2"])
def test_sentencepiece_tokens_equal_sentencepiece_itself(name, converted, checkpoints, files):
    """The rebuilt vocabulary tokenizes as the SentencePiece model it came from (text without special
    tokens; ``sentencepiece`` reads those as text)."""
    spm = pytest.importorskip("sentencepiece")
    _, folder, _ = converted[name]
    processor = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    _, _, ours = checkpoints[name]
    assert files[name].get("tokenizer.ggml.model") == "llama"
    for text in STRINGS:
        got = ours.backend.encode(text, add_special_tokens=False).ids
        assert got == processor.encode(text), text


def _hf(reference, name: str) -> torch.Tensor:
    return reference.state_dict()[name].float()


def test_llama_cpp_conventions_in_the_files(converted, files):
    """What the loader undoes, as the converter wrote it."""
    raw = {name: files[name].tensors() for name in converted}

    def ref(name):
        return converted[name][0]

    # Q/K rows are permuted for the llama architecture only.
    llama_q, hf_q = (
        raw["llama3"]["blk.0.attn_q.weight"],
        _hf(ref("llama3"), "model.layers.0.self_attn.q_proj.weight"),
    )
    assert not torch.allclose(llama_q, hf_q)
    torch.testing.assert_close(unpermute_rotary_rows(llama_q, 4), hf_q, atol=0, rtol=0)
    for name in ("gemma", "gemma2", "gemma3", "qwen2", "qwen3", "olmo2"):
        for which in ("q", "k"):
            torch.testing.assert_close(
                raw[name][f"blk.1.attn_{which}.weight"],
                _hf(ref(name), f"model.layers.1.self_attn.{which}_proj.weight"),
                atol=0,
                rtol=0,
                msg=f"{name} {which}",
            )
    # Gemma's norm gains are stored with the 1 added (q/k norms included in Gemma 3).
    for name, norms in (
        ("gemma", {"attn_norm": "input_layernorm"}),
        (
            "gemma2",
            {"post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm"},
        ),
        ("gemma3", {"attn_q_norm": "self_attn.q_norm", "post_ffw_norm": "post_feedforward_layernorm"}),
    ):
        for gguf_name, hf_name in norms.items():
            torch.testing.assert_close(
                raw[name][f"blk.0.{gguf_name}.weight"] - 1, _hf(ref(name), f"model.layers.0.{hf_name}.weight")
            )
    # Phi-3 keeps its fused [Q; K; V] and [gate; up]; GPT-NeoX's per-head q, k, v become [Q; K; V].
    phi3 = raw["phi3"]
    torch.testing.assert_close(
        phi3["blk.0.attn_qkv.weight"], _hf(ref("phi3"), "model.layers.0.self_attn.qkv_proj.weight")
    )
    torch.testing.assert_close(
        phi3["blk.0.ffn_up.weight"], _hf(ref("phi3"), "model.layers.0.mlp.gate_up_proj.weight")
    )
    neox = _hf(ref("pythia"), "gpt_neox.layers.0.attention.query_key_value.weight")
    blocks = rearrange(neox, "(h three e) d -> (three h e) d", h=4, three=3)  # per head -> [Q; K; V]
    torch.testing.assert_close(raw["pythia"]["blk.0.attn_qkv.weight"], blocks, atol=0, rtol=0)
    assert not torch.equal(blocks, neox)
    # Rotary scaling: Llama 3.1's as per-frequency divisors, Phi-3's longrope as two factor tensors.
    assert raw["llama3"]["rope_freqs.weight"].shape == (4,)
    assert {"rope_factors_long.weight", "rope_factors_short.weight"} <= set(raw["phi3"])
    assert files["gemma2"].get("gemma2.attn_logit_softcapping") == 4.0
    assert files["gemma3"].get("gemma3.rope.freq_base_swa") == 50.0
    assert files["qwen3"].get("qwen3.rope.scaling.type") == "yarn"
    assert "gemma2.query_pre_attn_scalar" not in files["gemma2"].keys()  # llama.cpp derives the query scale
    # GPT-OSS: the experts' interleaved gate and up columns become two stacked [expert, out, in] tensors; MXFP4
    # experts stay MXFP4; neither the experts' clamp nor YaRN's truncation is stored.
    fused = _hf(ref("gpt-oss"), "model.layers.0.mlp.experts.gate_up_proj")  # [expert, in, 2 * out]
    for gguf_name, start in (("ffn_gate_exps", 0), ("ffn_up_exps", 1)):
        torch.testing.assert_close(
            raw["gpt-oss"][f"blk.0.{gguf_name}.weight"], fused[..., start::2].transpose(1, 2), atol=0, rtol=0
        )
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(converted["gpt-oss-mxfp4"][2]).tensors}
    assert types["blk.0.ffn_gate_exps.weight"] == "MXFP4" and types["blk.0.attn_q.weight"] == "F32"
    assert not [key for key in files["gpt-oss"].keys() if "swiglu" in key or "trunc" in key]
