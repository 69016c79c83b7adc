"""A tiny random Llama saved as a Hugging Face folder, with a byte-level BPE trained on given texts, so a
study runs end to end through ``interp.load`` in seconds (any text tokenizes: the alphabet is every byte).

The one factory of the studies' tests for such folders; a test that needs another shape or initialisation
passes ``LlamaConfig`` fields as keywords."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


def tiny_llama_folder(path: Path, texts: list[str], vocab_size: int = 600, **config_fields) -> Path:
    """Write the model and ``tokenizer.json`` to ``path`` (seeded: the same arguments give the same weights)."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(texts, trainer)
    torch.manual_seed(0)
    fields = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=backend.get_vocab_size(),
        max_position_embeddings=256,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=1,
    )
    config = LlamaConfig(**{**fields, **config_fields})
    path.mkdir(parents=True, exist_ok=True)
    LlamaForCausalLM(config).eval().save_pretrained(path)
    backend.save(str(path / "tokenizer.json"))
    return path
