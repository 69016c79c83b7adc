"""Tiny checkpoints for llama.cpp's converter: one folder per GGUF architecture, with a tokenizer it accepts.

The converter recognises a byte-level BPE by the hash of what it makes of a fixed text, so those folders carry
SmolLM2's tokenizer, which it knows as ``smollm``: ``transformers`` reads it from the packaged SmolLM2 GGUF and
saves it. The others carry a SentencePiece ``tokenizer.model`` trained here with ``sentencepiece`` and the
``tokenizer.json`` that ``transformers`` converts from it: Gemma's shape for Gemma 1 and 2, and the shape the
Llama 2 and Phi-3 repositories ship for Phi-3 (and for Qwen2: ``transformers`` 5 rebuilds a Qwen2 folder's BPE
with Qwen2's own split, whose hash the converter does not know for SmolLM2's vocabulary, so the Qwen2 folder
converts through the converter's SentencePiece path instead).

SmolLM2's vocabulary has 49,152 tokens, so those models keep ``d_model`` small. The configs (``gguf-*`` in
:data:`tests.load.families.CONFIGS`) set what each GGUF architecture can carry; weights are drawn large
(:func:`tests.load.families.embolden`) so that a dropped ``+ 1``, a wrong row order or a missing scaling fails
the comparison by far.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch

from interp.atomic import COMPLETE
from tests.load import families
from tests.load.builders import CORPUS, mxfp4_experts, transformers_reading

transformers = pytest.importorskip("transformers")

SMOLLM_VOCAB = 49152
SPM_VOCAB = 400

VOCAB = {"smollm": SMOLLM_VOCAB, "gemma-spm": SPM_VOCAB, "llama-spm": SPM_VOCAB}  # per tokenizer

# name -> (config of tests.load.families.CONFIGS, tokenizer, GGUF architecture llama.cpp writes)
MODELS: dict[str, tuple[str, str, str]] = {
    "gemma": ("gguf-gemma", "gemma-spm", "gemma"),
    "gemma2": ("gguf-gemma2", "gemma-spm", "gemma2"),
    "gemma3": ("gguf-gemma3", "smollm", "gemma3"),
    "qwen2": ("gguf-qwen2", "llama-spm", "qwen2"),
    "qwen3": ("gguf-qwen3", "smollm", "qwen3"),
    "phi3": ("gguf-phi3", "llama-spm", "phi3"),
    "pythia": ("gguf-pythia", "smollm", "gptneox"),
    "olmo2": ("gguf-olmo2", "smollm", "olmo2"),
    "llama3": ("gguf-llama3", "smollm", "llama"),
    "mixtral": ("gguf-mixtral", "smollm", "llama"),
    "qwen2-moe": ("gguf-qwen2-moe", "smollm", "qwen2moe"),
    "qwen3-moe": ("gguf-qwen3-moe", "smollm", "qwen3moe"),
    "olmoe": ("gguf-olmoe", "smollm", "olmoe"),
    "gpt-oss": ("gguf-gpt-oss", "smollm", "gpt-oss"),
    "gpt-oss-mxfp4": ("gguf-gpt-oss", "smollm", "gpt-oss"),  # the folder's experts in MXFP4, and the file's
}
MXFP4 = ("gpt-oss-mxfp4",)
"""Models whose folder stores the experts in MXFP4, as the released GPT-OSS checkpoints do: llama.cpp's
converter keeps them MXFP4 in the file, and the reference is ``transformers``' dequantization of the folder."""


def build(name: str) -> torch.nn.Module:
    """The reference model of ``name`` in eager attention, weights large enough to matter."""
    config, tokenizer, _ = MODELS[name]
    return families.build(config, VOCAB[tokenizer])


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
    if name in MXFP4:
        mxfp4_experts(folder)
    return folder


def reference(name: str, built: torch.nn.Module, folder: Path) -> torch.nn.Module:
    """What the GGUF file of ``name`` is compared with: the model built, or, where the folder holds MXFP4
    experts, ``transformers``' own load of the folder (which dequantizes them)."""
    if name not in MXFP4:
        return built
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager"
    ).eval()


def smollm_tokenizer(folder: Path) -> Path:
    """SmolLM2's tokenizer as ``transformers`` reads it from the packaged GGUF, saved to ``folder`` (the reading
    is kept in the tests' cache: :func:`tests.load.builders.transformers_reading`)."""
    from interp.load.packaged import packaged_path

    path = packaged_path("smollm2-135m")

    def read(into: Path) -> None:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        tokenizer.save_pretrained(into)
        (into / "chat_template.jinja").unlink(missing_ok=True)

    shutil.copytree(
        transformers_reading(path, "tokenizer", read), folder, ignore=shutil.ignore_patterns(COMPLETE)
    )
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
