"""Tiny checkpoints for llama.cpp's converter: one folder per GGUF architecture, with a tokenizer it accepts.

The converter recognises a byte-level BPE by the hash of what it makes of a fixed text, so those folders carry
SmolLM2's tokenizer, which it knows as ``smollm``: ``transformers`` reads it from the packaged SmolLM2 GGUF and
saves it. The others carry a SentencePiece ``tokenizer.model`` trained here with ``sentencepiece`` and the
``tokenizer.json`` that ``transformers`` converts from it: Gemma's shape for Gemma 1 and 2, and the shape the
Llama 2 and Phi-3 repositories ship for Phi-3 (and for Qwen2: ``transformers`` 5 rebuilds a Qwen2 folder's BPE
with Qwen2's own split, whose hash the converter does not know for SmolLM2's vocabulary, so the Qwen2 folder
converts through the converter's SentencePiece path instead).

SmolLM2's vocabulary has 49,152 tokens, so those models keep ``d_model`` small. Configs set what each GGUF
architecture can carry (Gemma's query scale is the one llama.cpp derives from ``head_dim``); weights are drawn
large (:func:`tests.load.families.embolden`) so that a dropped ``+ 1``, a wrong row order or a missing scaling
fails the comparison by far.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.load.builders import CORPUS
from tests.load.families import WINDOW, embolden

transformers = pytest.importorskip("transformers")

SMOLLM_VOCAB = 49152
SPM_VOCAB = 400


def _common(vocab: int, **overrides) -> dict:
    kwargs = dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        vocab_size=vocab,
        max_position_embeddings=128,
    )
    kwargs.update(overrides)
    return kwargs


_SMOL = dict(vocab=SMOLLM_VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=2)
_GEMMA_SPM = dict(vocab=SPM_VOCAB, pad_token_id=0, eos_token_id=1, bos_token_id=2)
_LLAMA_SPM = dict(vocab=SPM_VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _config(ids: dict, **overrides) -> dict:
    ids = dict(ids)
    return _common(ids.pop("vocab"), **ids, **overrides)


def gemma():
    cfg = transformers.GemmaConfig(**_config(_GEMMA_SPM, head_dim=24, hidden_act="gelu_pytorch_tanh"))
    return transformers.GemmaForCausalLM(cfg)


def gemma2():
    cfg = transformers.Gemma2Config(
        **_config(_GEMMA_SPM, num_hidden_layers=3, head_dim=24),
        query_pre_attn_scalar=24,  # llama.cpp's: head_dim
        attn_logit_softcapping=4.0,
        final_logit_softcapping=6.0,
        sliding_window=WINDOW,
    )
    return transformers.Gemma2ForCausalLM(cfg)


def gemma3():
    cfg = transformers.Gemma3TextConfig(
        **_config(_SMOL, num_hidden_layers=7, hidden_size=48, head_dim=16, num_attention_heads=2),
        query_pre_attn_scalar=16,
        sliding_window=WINDOW,
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
        },
    )
    return transformers.Gemma3ForCausalLM(cfg)


def qwen2():
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**_config(_LLAMA_SPM)))


def qwen3():
    cfg = transformers.Qwen3Config(
        **_config(_SMOL, hidden_size=32, head_dim=16),
        tie_word_embeddings=False,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 16,
            "beta_fast": 8.0,
            "beta_slow": 1.0,
        },
    )
    return transformers.Qwen3ForCausalLM(cfg)


def phi3():
    half = 64 // 4 // 2  # rotary_dim / 2
    cfg = transformers.Phi3Config(
        **_config(_LLAMA_SPM, max_position_embeddings=64),
        sliding_window=WINDOW,
        tie_word_embeddings=False,
        original_max_position_embeddings=8,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "long_factor": [1.0 + 0.5 * i for i in range(half)],
            "short_factor": [1.0 + 0.125 * i for i in range(half)],
            "original_max_position_embeddings": 8,
        },
    )
    return transformers.Phi3ForCausalLM(cfg)


def pythia():
    cfg = transformers.GPTNeoXConfig(
        **_config(_SMOL, num_key_value_heads=None),
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        use_parallel_residual=True,
        hidden_act="gelu",
    )
    return transformers.GPTNeoXForCausalLM(cfg)


def olmo2():
    return transformers.Olmo2ForCausalLM(transformers.Olmo2Config(**_config(_SMOL, hidden_size=32)))


def llama3():
    cfg = transformers.LlamaConfig(
        **_config(_SMOL, hidden_size=32),
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    )
    return transformers.LlamaForCausalLM(cfg)


# name -> (builder, tokenizer, GGUF architecture llama.cpp writes)
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], str, str]] = {
    "gemma": (gemma, "gemma-spm", "gemma"),
    "gemma2": (gemma2, "gemma-spm", "gemma2"),
    "gemma3": (gemma3, "smollm", "gemma3"),
    "qwen2": (qwen2, "llama-spm", "qwen2"),
    "qwen3": (qwen3, "smollm", "qwen3"),
    "phi3": (phi3, "llama-spm", "phi3"),
    "pythia": (pythia, "smollm", "gptneox"),
    "olmo2": (olmo2, "smollm", "olmo2"),
    "llama3": (llama3, "smollm", "llama"),
}


def build(name: str) -> torch.nn.Module:
    """The reference model of ``name`` in eager attention, weights large enough to matter."""
    torch.manual_seed(0)
    model = MODELS[name][0]()
    model.config._attn_implementation = "eager"
    embolden(model)
    return model.eval()


def save(name: str, model: torch.nn.Module, tokenizer_dir: Path, folder: Path) -> Path:
    """``save_pretrained`` plus the tokenizer files; Pythia's config gets the keys its hub configs have."""
    model.save_pretrained(folder)
    for file in tokenizer_dir.iterdir():
        shutil.copy(file, folder / file.name)
    if name == "pythia":  # as EleutherAI's config.json spell them, which llama.cpp's converter reads
        path = folder / "config.json"
        config = json.loads(path.read_text())
        config.update(rotary_pct=0.25, rotary_emb_base=10000)
        path.write_text(json.dumps(config, indent=2))
    return folder


def smollm_tokenizer(folder: Path) -> Path:
    """SmolLM2's tokenizer as ``transformers`` reads it from the packaged GGUF, saved to ``folder``."""
    from interp.load.packaged import packaged_path

    path = packaged_path("smollm2-135m")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tokenizer.save_pretrained(folder)
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


def sentencepiece_tokenizer(style: str, folder: Path) -> Path:
    """A SentencePiece BPE trained on the test corpus with byte fallback, and the folder's tokenizer files.

    ``"gemma"``: ids pad 0, eos 1, bos 2, unk 3, mask 4, no dummy prefix, whitespace pieces, as Gemma's;
    ``"llama"``: unk 0, bos 1, eos 2 and a dummy prefix, as Llama 2's and Phi-3's, with their ``tokenizer.json``
    shape (a ``Prepend("▁")`` normalizer rather than ``transformers``' ``Metaspace``).
    """
    spm = pytest.importorskip("sentencepiece")
    pytest.importorskip("google.protobuf")  # transformers converts tokenizer.model with it
    if style == "gemma":
        ids = dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, control_symbols=["<mask>"], add_dummy_prefix=False)
        ids.update(pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>")
    else:
        ids = dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1, add_dummy_prefix=True)
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS),
        model_writer=proto,
        vocab_size=SPM_VOCAB,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        split_digits=True,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        allow_whitespace_only_pieces=True,
        minloglevel=2,
        **ids,
    )
    source = folder / "spm"
    source.mkdir(parents=True)
    (source / "tokenizer.model").write_bytes(proto.getvalue())
    if style == "gemma":
        tokenizer = transformers.GemmaTokenizer.from_pretrained(str(source), add_bos_token=True)
    else:
        from tokenizers import normalizers

        tokenizer = transformers.LlamaTokenizer.from_pretrained(str(source))
        backend = tokenizer.backend_tokenizer
        backend.normalizer = normalizers.Sequence(
            [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
        )
        backend.pre_tokenizer = None
    out = folder / "tokenizer"
    tokenizer.save_pretrained(out)
    shutil.move(source / "tokenizer.model", out / "tokenizer.model")
    settings_path = out / "tokenizer_config.json"
    settings = json.loads(settings_path.read_text())
    settings.pop("vocab_file", None)
    settings["add_bos_token"] = True  # said explicitly, so the folder and the GGUF file say the same
    settings_path.write_text(json.dumps(settings, indent=2))
    return out
