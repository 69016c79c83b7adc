"""SentencePiece vocabularies in GGUF files (``tokenizer.ggml.model == "llama"``), rebuilt with ``tokenizers``.

llama.cpp stores a SentencePiece model (Gemma's, Llama 2's, Phi-3's) as its pieces, their scores and their
types, and tokenizes as SentencePiece's BPE does: spaces become ``▁``, adjacent pieces are merged, the pair
whose merged piece scores highest first, and what no piece covers falls back to byte tokens (``<0x41>``). That
is BPE with merges ranked by score, which ``tokenizers`` runs as the ``tokenizer.json`` of these models does:
a ``▁`` is prepended to the text and after each special token when the file says
``tokenizer.ggml.add_space_prefix`` (llama.cpp's default, and Llama 2's and Phi-3's ``tokenizer.json``;
Gemma's files say no), and decoding undoes it. The merges are every split of a normal piece into two pieces of
the vocabulary, ranked by the merged piece's score, ties by its position in the vocabulary (the order
SentencePiece learned them in).
"""

from __future__ import annotations

from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, normalizers

from interp.load.errors import CheckpointError
from interp.load.gguf_file import GGUFFile

# llama.cpp's token types
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def sentencepiece_backend(file: GGUFFile, tokens: list[str], types: list[int]) -> Backend:
    """The ``tokenizers`` backend of a SentencePiece vocabulary (its special tokens are added by the caller)."""
    scores = file.get("tokenizer.ggml.scores", None)
    if scores is None or len(scores) != len(tokens):
        raise CheckpointError(
            f"{file.path}: a SentencePiece vocabulary needs tokenizer.ggml.scores, one per token "
            f"({len(tokens)}), to rank its merges; found {None if scores is None else len(scores)}"
        )
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token in vocab:
            raise CheckpointError(
                f"{file.path}: token {token!r} appears twice in tokenizer.ggml.tokens (ids {vocab[token]} and "
                f"{index}); a vocabulary with a token of two ids cannot be rebuilt exactly"
            )
        vocab[token] = index
    unknown = next((tokens[i] for i, t in enumerate(types) if t == UNKNOWN), None)
    backend = Backend(
        models.BPE(
            vocab=vocab,
            merges=merges(tokens, scores, types),
            unk_token=unknown,
            fuse_unk=True,
            byte_fallback=BYTE in types,
            dropout=None,
        )
    )
    prefix = bool(file.get("tokenizer.ggml.add_space_prefix", True))
    replace = normalizers.Replace(" ", "\u2581")
    backend.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), replace]) if prefix else replace
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    backend.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if prefix else []))
    return backend


def merges(tokens: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """Every split of a normal piece into two pieces of the vocabulary, best merged piece first.

    >>> merges(["a", "b", "ab", "abb"], [0.0, 0.0, -1.0, -2.0], [1, 1, 1, 1])
    [('a', 'b'), ('ab', 'b')]
    """
    known = set(tokens)
    ranked = sorted(
        (i for i, t in enumerate(types) if t == NORMAL and len(tokens[i]) > 1), key=lambda i: (-scores[i], i)
    )
    pairs = []
    for i in ranked:
        piece = tokens[i]
        pairs += [(piece[:k], piece[k:]) for k in range(1, len(piece)) if {piece[:k], piece[k:]} <= known]
    return pairs
