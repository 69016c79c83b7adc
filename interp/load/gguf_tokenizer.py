"""The tokenizer a GGUF file describes in its metadata, built with ``tokenizers``.

A GGUF file has no ``tokenizer.json``: it stores the vocabulary (``tokenizer.ggml.tokens``), the merges or the
piece scores, each token's type and the special ids. Two kinds are rebuilt, giving the same ids and offsets as
the ``tokenizer.json`` of the checkpoint the file was converted from:

- ``tokenizer.ggml.model == "gpt2"``: a GPT-2 style byte-level BPE, as ``transformers`` builds it for such a
  file (``AutoTokenizer.from_pretrained(folder, gguf_file=...)``), with the pre-tokenizer split named by
  ``tokenizer.ggml.pre`` where that names one of the regular expressions below (others, SmolLM's ``smollm``
  among them, use GPT-2's; llama.cpp splits SmolLM's digits one by one, which changes nothing since its
  vocabulary has no token of two digits or of a space and a digit);
- ``"llama"``: a SentencePiece vocabulary (Gemma, Llama 2, Phi-3), see :mod:`interp.load.gguf_sentencepiece`.

Control tokens (and SentencePiece's unknown token) are special tokens, user-defined ones are matched whole, and
BOS/EOS are added when the file says ``add_bos_token`` or ``add_eos_token``, by llama.cpp's defaults when it
does not (BOS for SentencePiece, nothing for byte-level BPE).
"""

from __future__ import annotations

from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, processors
from tokenizers import Tokenizer as Backend

from interp.load.errors import CheckpointError
from interp.load.gguf_file import GGUFFile
from interp.load.gguf_sentencepiece import CONTROL, NORMAL, UNKNOWN, USER_DEFINED, sentencepiece_backend
from interp.tokens import Tokenizer

KINDS = ("gpt2", "llama")

_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZER_SPLITS = {
    "llama3": _LLAMA3, "llama-v3": _LLAMA3, "llama-bpe": _LLAMA3, "smaug-bpe": _LLAMA3, "dbrx": _LLAMA3,
    "qwen2": _QWEN2, "deepseek-r1-qwen": _QWEN2,
}  # fmt: skip


def gguf_tokenizer(file: GGUFFile, n_ctx: int | None = None) -> Tokenizer:
    """The :class:`~interp.tokens.Tokenizer` described by ``file``'s ``tokenizer.ggml.*`` metadata."""
    kind = file.get("tokenizer.ggml.model")
    if kind not in KINDS:
        raise CheckpointError(
            f"{file.path}: tokenizer.ggml.model={kind!r} is not supported; supported: {list(KINDS)} "
            "(byte-level BPE, SentencePiece)"
        )
    tokens = file.get("tokenizer.ggml.tokens")
    types = file.get("tokenizer.ggml.token_type", None) or [NORMAL] * len(tokens)
    specials = {
        key: file.get(f"tokenizer.ggml.{key}_token_id", None) for key in ("bos", "eos", "unknown", "padding")
    }
    for key, index in specials.items():
        if index is not None and not 0 <= index < len(tokens):
            raise CheckpointError(
                f"{file.path}: tokenizer.ggml.{key}_token_id={index} is outside the vocabulary"
            )
    if kind == "gpt2":
        backend = _byte_level(file, tokens)
        alphabet = set(_bytes_to_unicode().values())
        marked = {i for i, t in enumerate(types) if t == CONTROL and set(tokens[i]) <= alphabet}
    else:
        backend = sentencepiece_backend(file, tokens, types)
        marked = {i for i, t in enumerate(types) if t in (CONTROL, UNKNOWN)}
    marked |= {i for i in specials.values() if i is not None}
    backend.add_special_tokens(
        [AddedToken(tokens[i], normalized=False, special=True) for i in sorted(marked)]
    )
    user = [
        AddedToken(tokens[i], normalized=False, special=False)
        for i, t in enumerate(types)
        if t == USER_DEFINED
    ]
    if user:
        backend.add_tokens(user)
    bos, eos = specials["bos"], specials["eos"]
    backend.post_processor = _post_processor(
        tokens,
        bos if file.get("tokenizer.ggml.add_bos_token", kind == "llama") else None,
        eos if file.get("tokenizer.ggml.add_eos_token", False) else None,
    )
    template = file.get("tokenizer.chat_template", None)
    return Tokenizer(
        backend,
        bos_id=bos,
        eos_id=eos,
        pad_id=specials["padding"],
        n_ctx=n_ctx,
        name=str(file.path),
        chat_template=template if isinstance(template, str) else None,
    )


def _byte_level(file: GGUFFile, tokens: list[str]) -> Backend:
    backend = Backend(
        models.BPE(
            vocab=_vocab(tokens),
            merges=_merges(file),
            dropout=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
        )
    )
    backend.pre_tokenizer = _pre_tokenizer(file.get("tokenizer.ggml.pre", None))
    backend.decoder = decoders.ByteLevel()
    return backend


def _vocab(tokens: list[str]) -> dict[str, int]:
    # Byte-level vocabularies spell every token in the 256-character byte alphabet; respell any that is not.
    spelling = _bytes_to_unicode()
    alphabet = set(spelling.values())
    return {
        (t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8"))): i
        for i, t in enumerate(tokens)
    }


def _merges(file: GGUFFile) -> list[tuple[str, str]]:
    merges = file.get("tokenizer.ggml.merges", None)
    if merges is None:
        raise CheckpointError(
            f"{file.path}: a byte-level BPE tokenizer needs tokenizer.ggml.merges, which is missing"
        )
    pairs = [tuple(m.split(" ")) for m in merges]
    bad = [m for m, p in zip(merges, pairs, strict=True) if len(p) != 2]
    if bad:
        raise CheckpointError(f"{file.path}: malformed merges (expected 'a b'): {bad[:3]}")
    return pairs  # type: ignore[return-value]


def _pre_tokenizer(pre: str | None) -> pre_tokenizers.PreTokenizer:
    split = PRE_TOKENIZER_SPLITS.get(pre)
    if split is None:
        return pre_tokenizers.ByteLevel(add_prefix_space=False)
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _post_processor(tokens: list[str], bos: int | None, eos: int | None) -> processors.TemplateProcessing:
    prefix = [f"{tokens[bos]}:0"] if bos is not None else []
    suffix = [f"{tokens[eos]}:0"] if eos is not None else []
    special = [(tokens[i], i) for i in (bos, eos) if i is not None]
    single = " ".join([*prefix, "$A:0", *suffix])
    pair = " ".join(
        [single, *[p.replace(":0", ":1") for p in prefix], "$B:1", *[s.replace(":0", ":1") for s in suffix]]
    )
    return processors.TemplateProcessing(single=single, pair=pair, special_tokens=special)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character (spaces become ``Ġ``, newlines ``Ċ``)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars), strict=True))
