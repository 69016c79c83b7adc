"""GGUF files written here from a tiny random Llama, read by our loader and by transformers.

Both dequantize the same bytes, so weights agree to float32 rounding; the Q/K un-permutation is checked
directly against the original projection, and skipping it is shown not to match. Two pieces are checked against
independent references: ``rope_freqs`` divisors against ``transformers``' Llama 3.1 rotary, and a SentencePiece
vocabulary, stored as llama.cpp stores one, against the ``sentencepiece`` library. Files written by llama.cpp's
own converter are in ``test_gguf_llama_cpp.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as Q

from interp.load import load_checkpoint
from interp.load.gguf_file import GGUFFile
from interp.load.gguf_hf import unpermute_rotary_rows
from tests.load.builders import SEED, byte_level_bpe, hf_from_gguf, write_llama_gguf
from tests.load.families import tiny_llama

QUANTIZED = {
    "attn_q.weight": Q.Q8_0,
    "attn_k.weight": Q.Q4_0,
    "attn_v.weight": Q.Q4_1,
    "attn_output.weight": Q.Q5_0,
    "ffn_gate.weight": Q.Q5_1,
    "ffn_up.weight": Q.F16,
    "ffn_down.weight": Q.BF16,
}
STRINGS = [
    SEED,
    "Numbers 12345 and 3.14159, x1y22",
    "  leading spaces\tand\t\ttabs\n\nnewlines   ",
    "café naïve Ångström",
    "日本語のテキスト",
    "emoji 😀👍🏽 done",
    "<|endoftext|> in the middle <|endoftext|>",
]


@pytest.fixture(scope="module")
def bpe():
    return byte_level_bpe()


@pytest.fixture(scope="module")
def reference(bpe):
    return tiny_llama(vocab_size=bpe.get_vocab_size())


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory, reference, bpe):
    folder = tmp_path_factory.mktemp("gguf")
    write_llama_gguf(reference, bpe, folder / "f32.gguf")
    write_llama_gguf(reference, bpe, folder / "quant.gguf", qtypes=QUANTIZED)
    write_llama_gguf(reference, bpe, folder / "unpermuted.gguf", permute=False)
    return folder


@pytest.fixture(scope="module")
def hf_quant(gguf_dir):
    return hf_from_gguf(gguf_dir / "quant.gguf")


def _w_q_rows(w_q: torch.Tensor) -> torch.Tensor:
    """Our ``W_Q [head, d_model, d_head]`` as a Hugging Face ``q_proj.weight [head * d_head, d_model]``."""
    return w_q.permute(0, 2, 1).reshape(-1, w_q.shape[1])


def test_unpermuted_q_and_k_equal_the_original(gguf_dir, reference):
    cfg, state, _ = load_checkpoint(gguf_dir / "f32.gguf", use_cache=False)
    attn = reference.model.layers[1].self_attn
    torch.testing.assert_close(_w_q_rows(state["blocks.1.attn.W_Q"]), attn.q_proj.weight, atol=0, rtol=0)
    torch.testing.assert_close(_w_q_rows(state["blocks.1.attn.W_K"]), attn.k_proj.weight, atol=0, rtol=0)
    raw = GGUFFile(gguf_dir / "f32.gguf").tensors()["blk.1.attn_q.weight"]
    assert not torch.allclose(raw, attn.q_proj.weight)  # the file really is permuted
    torch.testing.assert_close(unpermute_rotary_rows(raw, cfg.n_heads), attn.q_proj.weight, atol=0, rtol=0)


def test_skipping_the_unpermutation_is_caught(gguf_dir, reference):
    _, state, _ = load_checkpoint(gguf_dir / "unpermuted.gguf", use_cache=False)
    q_proj = reference.model.layers[0].self_attn.q_proj.weight
    assert (_w_q_rows(state["blocks.0.attn.W_Q"]) - q_proj).abs().max() > 1e-2


def test_quantized_weights_match_transformers(gguf_dir, hf_quant):
    cfg, state, _ = load_checkpoint(gguf_dir / "quant.gguf", use_cache=False)
    hf = hf_quant.state_dict()
    for layer in range(cfg.n_layers):
        attn, mlp = f"model.layers.{layer}.self_attn.", f"model.layers.{layer}.mlp."
        ours = f"blocks.{layer}."
        torch.testing.assert_close(
            _w_q_rows(state[ours + "attn.W_Q"]), hf[attn + "q_proj.weight"], atol=1e-6, rtol=0
        )
        torch.testing.assert_close(
            _w_q_rows(state[ours + "attn.W_K"]), hf[attn + "k_proj.weight"], atol=1e-6, rtol=0
        )
        torch.testing.assert_close(
            _w_q_rows(state[ours + "attn.W_V"]), hf[attn + "v_proj.weight"], atol=1e-6, rtol=0
        )
        torch.testing.assert_close(
            state[ours + "mlp.W_gate"].T, hf[mlp + "gate_proj.weight"], atol=1e-6, rtol=0
        )
        torch.testing.assert_close(state[ours + "mlp.W_in"].T, hf[mlp + "up_proj.weight"], atol=1e-6, rtol=0)
        torch.testing.assert_close(
            state[ours + "mlp.W_out"].T, hf[mlp + "down_proj.weight"], atol=1e-6, rtol=0
        )
    assert cfg.tie_embeddings is False and "unembed.W_U" in state


@pytest.mark.parametrize("qtype", [Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K])
def test_k_quants_match_transformers(tmp_path, qtype):
    import gguf
    from transformers.integrations.gguf.dequant import dequantize as hf_dequantize

    rows, cols = 3, 512
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(rows * cols // block_elems, block_bytes), dtype=np.uint8)
    scale_offsets = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,)}[qtype]
    for offset in scale_offsets:  # finite fp16 scales, as a real quantizer writes
        raw[:, offset : offset + 2] = (
            rng.uniform(-0.1, 0.1, size=(raw.shape[0], 1)).astype(np.float16).view(np.uint8)
        )
    writer = gguf.GGUFWriter(str(tmp_path / "k.gguf"), "llama")
    writer.add_tensor("w", raw.reshape(rows, -1), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours = GGUFFile(tmp_path / "k.gguf").tensors()["w"]
    theirs = hf_dequantize(torch.from_numpy(raw.reshape(-1).copy()), int(qtype)).reshape(rows, cols)
    assert ours.shape == (rows, cols)
    torch.testing.assert_close(ours, theirs.float(), atol=1e-6, rtol=1e-6)


def test_logits_match_transformers(gguf_dir, hf_quant, bpe):
    from interp.load import load

    model = load(gguf_dir / "quant.gguf")
    ids, mask = model.to_tokens([SEED, "The cat sat on the mat."], padding_side="right")
    with torch.no_grad():
        ours = model(ids, mask)
        theirs = hf_quant(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    diff = (ours - theirs)[real].abs().max().item()
    assert diff < 1e-4, diff


def test_tokenizer_matches_transformers(gguf_dir):
    from transformers import AutoTokenizer

    theirs = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file="f32.gguf")
    _, _, ours = load_checkpoint(gguf_dir / "f32.gguf", use_cache=False)
    assert ours.prepends_bos  # the file says add_bos_token
    for text in STRINGS:
        expected = theirs(text, return_offsets_mapping=True)
        got = ours.to_tokens(text)
        assert got.ids[0].tolist() == expected["input_ids"], text
        assert [tuple(o) for o in got.offsets[0].tolist()] == [
            tuple(o) for o in expected["offset_mapping"]
        ], text
        assert ours.decode(got.ids[0], skip_special_tokens=True) == theirs.decode(
            expected["input_ids"], skip_special_tokens=True
        )


def _llama3_divisors(config) -> np.ndarray:
    """Llama 3.1's rule as per-frequency divisors of the plain rotary frequencies, computed naively here."""
    params = config.rope_parameters
    dim = config.hidden_size // config.num_attention_heads
    old, factor = params["original_max_position_embeddings"], params["factor"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    divisors = []
    for i in range(0, dim, 2):
        wavelength = 2 * np.pi * params["rope_theta"] ** (i / dim)
        if wavelength < old / high:
            divisors.append(1.0)
        elif wavelength > old / low:
            divisors.append(factor)
        else:
            smooth = (old / wavelength - low) / (high - low)
            divisors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(divisors, dtype=np.float32)


def test_rope_freqs_divisors_load_llama3_scaling_exactly(tmp_path, bpe):
    """A ``rope_freqs`` tensor (how GGUF files carry Llama 3.1's scaling) gives transformers' llama3 rotary."""
    from interp.load import load
    from tests.load.families import build

    reference = build("llama3-rope", bpe.get_vocab_size())
    divisors = _llama3_divisors(reference.config)
    assert divisors.max() == 8.0 and 1.0 < divisors.min() < 8.0  # scaled, and a ramp

    def rope_freqs(writer):
        writer.add_tensor("rope_freqs.weight", divisors)

    path = write_llama_gguf(reference, bpe, tmp_path / "llama31.gguf", extra=rope_freqs)
    model = load(path)
    assert model.cfg.rotary_scaling.kind == "factors"
    ids, mask = model.to_tokens([SEED * 2, "The cat sat on the mat."])
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ours = model(ids, mask)
        theirs = reference(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    torch.testing.assert_close(ours[mask.bool()], theirs[mask.bool()], atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        plain = model.cfg.replace(rotary_scaling=None)
        from interp import HookedTransformer

        unscaled = HookedTransformer(plain, init_weights=False)
        unscaled.load_state_dict(model.state_dict())
        gap = (unscaled(ids, mask) - ours)[mask.bool()].abs().max()
    assert gap > 1e-2  # the divisors matter


@pytest.mark.parametrize("prefix", [True, False], ids=["space-prefix", "no-prefix"])
def test_sentencepiece_vocabulary_tokenizes_as_sentencepiece(tmp_path, prefix):
    """A GGUF SentencePiece vocabulary (pieces, scores, types, as llama.cpp stores them) is rebuilt to give
    the ids of the ``sentencepiece`` library on the model it came from."""
    spm = pytest.importorskip("sentencepiece")
    import io

    from tests.load.builders import CORPUS

    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=proto, vocab_size=400, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, split_digits=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", add_dummy_prefix=prefix, minloglevel=2,
    )  # fmt: skip
    processor = spm.SentencePieceProcessor(model_proto=proto.getvalue())
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]

    def kind(i: int) -> int:
        checks = (processor.is_unknown, processor.is_control, processor.is_byte)
        return next((t for t, check in zip((2, 3, 6), checks, strict=True) if check(i)), 1)

    def sentencepiece(writer):
        writer.add_string("tokenizer.ggml.model", "llama")
        writer.add_token_list(pieces)
        writer.add_token_scores([processor.get_score(i) for i in range(len(pieces))])
        writer.add_token_types([kind(i) for i in range(len(pieces))])
        writer.add_bos_token_id(processor.bos_id())
        writer.add_eos_token_id(processor.eos_id())
        if not prefix:
            writer.add_add_space_prefix(False)  # as Gemma's files say

    path = write_llama_gguf(
        tiny_llama(len(pieces)), byte_level_bpe(), tmp_path / "spm.gguf", extra=sentencepiece
    )
    _, _, ours = load_checkpoint(path, use_cache=False)
    for text in [*STRINGS[:-1], " x", "a  b   c"]:
        got = ours.to_tokens(text, prepend_bos=False)
        assert got.ids[0].tolist() == processor.encode(text), text
        assert ours.decode(got.ids[0]) == processor.decode(processor.encode(text)), text
    assert ours.to_tokens("hi").ids[0, 0] == processor.bos_id()  # llama.cpp adds BOS unless told otherwise


class _Without:
    """A model whose state dict lacks one tensor, for writing an incomplete GGUF file."""

    def __init__(self, model: torch.nn.Module, missing: str) -> None:
        self.config, self._model, self._missing = model.config, model, missing

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self._model.state_dict().items() if k != self._missing}


def test_a_tensor_the_file_lacks_is_named_as_the_file_names_it(tmp_path, reference, bpe):
    from interp.load.errors import CheckpointError

    path = write_llama_gguf(
        _Without(reference, "model.layers.1.mlp.down_proj.weight"), bpe, tmp_path / "cut.gguf"
    )
    with pytest.raises(
        CheckpointError, match=r"cut.gguf has no tensor 'blk.1.ffn_down.weight'; the checkpoint"
    ):
        load_checkpoint(path, use_cache=False)


def test_a_missing_expert_tensor_or_router_is_named_as_the_gguf_file_names_it():
    """A Mixtral file's experts, as the GGUF reader hands them to the converter (stacked, in Mixtral's names):
    the one it lacks is named by its GGUF tensor (``blk.1.ffn_down_exps.weight``)."""
    import functools

    from interp.config import TransformerConfig
    from interp.load.errors import CheckpointError
    from interp.load.experts import ExpertNames, read_moe
    from interp.load.gguf_archs import LLAMA
    from interp.load.gguf_hf import gguf_tensor_name
    from interp.load.tensors import TensorSource

    cfg = TransformerConfig(
        n_layers=2, d_model=8, n_heads=2, d_vocab=16, n_ctx=8, d_mlp=12, n_experts=4, experts_per_token=2
    )
    names = ExpertNames(blocks=("block_sparse_moe", "mlp"), projections=("w1", "w3", "w2"))
    block = "model.layers.1.block_sparse_moe."
    tensors = {
        block + "gate.weight": torch.zeros(4, 8),
        block + "experts.w1.weight": torch.zeros(4, 12, 8),
        block + "experts.w3.weight": torch.zeros(4, 12, 8),
    }
    stored_as = functools.partial(gguf_tensor_name, arch=LLAMA)
    with pytest.raises(CheckpointError, match=r"f.gguf has no tensor 'blk.1.ffn_down_exps.weight'"):
        read_moe(
            TensorSource(dict(tensors), "f.gguf", stored_as), cfg, "model.layers.1.", "blocks.1.mlp.", names
        )
    bare = {k: v for k, v in tensors.items() if not k.endswith("gate.weight")}
    with pytest.raises(CheckpointError, match=r"has no router for layer 1 \('blk.1.ffn_gate_inp.weight'\)"):
        read_moe(TensorSource(bare, "f.gguf", stored_as), cfg, "model.layers.1.", "blocks.1.mlp.", names)
    # a folder of the released layout keeps its own names
    with pytest.raises(
        CheckpointError, match=r"has no tensor 'model.layers.1.block_sparse_moe.experts.0.w1.weight'"
    ):
        read_moe(TensorSource({block + "gate.weight": torch.zeros(4, 8)}, "folder", None), cfg,
                 "model.layers.1.", "blocks.1.mlp.", names)  # fmt: skip
