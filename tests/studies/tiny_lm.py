"""A tiny random Llama saved as a Hugging Face folder, with a byte-level BPE trained on given texts, so a
study runs end to end through ``interp.load`` in seconds (any text tokenizes: the alphabet is every byte).

Built from the tests' one checkpoint factory (:mod:`tests.load.families`), narrower than its ``llama`` and
with a padding token; a test that needs another shape or initialisation passes ``LlamaConfig`` fields."""

from __future__ import annotations

from pathlib import Path

import pytest

STUDY_FIELDS = dict(hidden_size=32, intermediate_size=64, max_position_embeddings=256, pad_token_id=1)


def tiny_llama_folder(path: Path, texts: list[str], vocab_size: int = 600, **config_fields) -> Path:
    """Write the model and ``tokenizer.json`` to ``path`` (seeded: the same arguments give the same weights)."""
    pytest.importorskip("transformers")
    from tests.load.builders import byte_level_bpe
    from tests.load.families import tiny_llama

    backend = byte_level_bpe(vocab_size, texts)
    path.mkdir(parents=True, exist_ok=True)
    tiny_llama(backend.get_vocab_size(), folder=path, tokenizer=backend, **{**STUDY_FIELDS, **config_fields})
    return path
