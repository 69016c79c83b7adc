"""Tokenizer wrapper: text to padded id tensors, and character spans to token positions.

Studies ask questions about words ("where does the model look from *it*?"), while models see token positions.
This module keeps the bridge between the two in one place: every tokenization keeps the character offsets the
``tokenizers`` library reports, so a character span of the text maps to the token positions that cover it,
whatever the tokenizer does to spaces (byte-level BPE folds the leading space into the token: ``" it"``
covers the space before ``it``), to words (WordPiece splits ``tired`` into ``ti ##red``), at the start (a BOS
or ``[CLS]`` token covers no character) or in a padded batch (left padding shifts every position).

A token covers a span when their character ranges overlap; special tokens (BOS, ``[CLS]``, ``[SEP]``) and
padding cover nothing.

Example:
    >>> tok = Tokenizer(backend)  # doctest: +SKIP
    >>> ids, mask = tok.to_tokens(["a cat", "the big dog"], padding_side="left")  # doctest: +SKIP
    >>> text = "The animal didn't cross the street because it was too tired"
    >>> find_span(text, "it")
    (43, 45)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import tokenizers
import torch

PaddingSide = Literal["left", "right"]


@dataclass(frozen=True)
class Tokens:
    """A tokenized batch, padded to one length.

    It unpacks (and indexes) like the pair ``(ids, mask)``: ``ids, mask = tokenizer.to_tokens(texts)``; the
    other fields align text and tokens.

    Attributes:
        ids: token ids, LongTensor ``[batch, pos]``; padding positions hold the pad id.
        mask: attention mask, LongTensor ``[batch, pos]``: 1 for a real token (special tokens included), 0 for
            padding.
        offsets: LongTensor ``[batch, pos, 2]``: the ``(start, end)`` character range of ``texts[b]`` that
            each token covers; ``(0, 0)`` for special tokens and padding.
        special: BoolTensor ``[batch, pos]``: tokens the tokenizer added (BOS, ``[CLS]``, ``[SEP]``).
        texts: the input texts, one per row.
        padding_side: where the padding went.
    """

    ids: torch.Tensor
    mask: torch.Tensor
    offsets: torch.Tensor
    special: torch.Tensor
    texts: tuple[str, ...]
    padding_side: PaddingSide

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter((self.ids, self.mask))

    def __getitem__(self, index: int | slice) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return (self.ids, self.mask)[index]

    def span_positions(self, start: int, end: int, row: int = 0) -> list[int]:
        """Positions in row ``row`` (padding included) of the tokens covering characters ``[start, end)``.

        Args:
            start: first character of the span in ``texts[row]``.
            end: one past its last character.
            row: which text of the batch.

        Returns:
            Increasing token positions, never empty.

        Raises:
            ValueError: the span is empty, outside the text, or covered by no token (e.g. only whitespace that
                the tokenizer dropped).
        """
        if not 0 <= row < len(self.texts):
            raise ValueError(f"row={row} is outside the batch of {len(self.texts)} texts")
        text = self.texts[row]
        if not 0 <= start < end <= len(text):
            raise ValueError(
                f"character span [{start}, {end}) is not a non-empty span of the text of length "
                f"{len(text)}: {text!r}"
            )
        starts, ends = self.offsets[row, :, 0], self.offsets[row, :, 1]  # [pos] each
        covers = (starts < end) & (ends > start) & self.mask[row].bool() & ~self.special[row]
        positions = covers.nonzero().flatten().tolist()
        if not positions:
            raise ValueError(f"no token covers characters [{start}, {end}) = {text[start:end]!r} of {text!r}")
        return positions


def find_span(text: str, substring: str, occurrence: int = 0) -> tuple[int, int]:
    """Character span ``(start, end)`` of the ``occurrence``-th (0-based) appearance of ``substring``.

    Matching is exact and case-sensitive; occurrences do not overlap.

    >>> find_span("the cat saw the dog", "the", occurrence=1)
    (12, 15)
    """
    if not substring:
        raise ValueError("find_span needs a non-empty substring")
    if occurrence < 0:
        raise ValueError(f"occurrence={occurrence}; expected 0 (the first) or more")
    start, search_from = -1, 0
    for found in range(occurrence + 1):
        start = text.find(substring, search_from)
        if start < 0:
            raise ValueError(
                f"{substring!r} occurs {found} time(s) in {text!r}; "
                f"asked for occurrence {occurrence} (0-based)"
            )
        search_from = start + len(substring)
    return start, start + len(substring)


class Tokenizer:
    """A ``tokenizers.Tokenizer`` that knows its special tokens, its model's context and how to pad.

    By default text is encoded as the checkpoint intends: its post-processor adds what the model was trained
    with (Llama GGUF files with ``add_bos_token``: BOS; BERT: ``[CLS] ... [SEP]``; GPT-2: nothing).
    ``prepend_bos=True`` or ``False`` forces a BOS token in or out.

    Args:
        backend: the tokenizer; its own padding and truncation are switched off (padding is done here, and
            truncating silently would drop text that was asked for).
        bos_id: beginning-of-sequence id, or ``None`` if the vocabulary has none (BERT's ``[CLS]`` is added by
            its post-processor and is not treated as a BOS).
        eos_id: end-of-sequence id, or ``None``.
        pad_id: id placed at padding positions; defaults to ``eos_id``, then 0. The mask marks them anyway.
        prepend_bos: the default for :meth:`to_tokens`'s ``prepend_bos``; ``None`` leaves it to the backend's
            post-processor (``True`` if a checkpoint says ``add_bos_token`` but its post-processor does not).
        padding_side: default side for padding a batch.
        n_ctx: the model's context; longer texts raise instead of being cut.
        name: a label for messages (e.g. the checkpoint's path).
        chat_template: the checkpoint's chat template (Jinja source), or ``None``; see :meth:`chat_tokens`.
    """

    def __init__(
        self,
        backend: tokenizers.Tokenizer,
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
        pad_id: int | None = None,
        prepend_bos: bool | None = None,
        padding_side: PaddingSide = "right",
        n_ctx: int | None = None,
        name: str | None = None,
        chat_template: str | None = None,
    ) -> None:
        backend.no_padding()
        backend.no_truncation()
        self.backend = backend
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.pad_id = pad_id if pad_id is not None else (eos_id if eos_id is not None else 0)
        self.default_prepend_bos = prepend_bos
        self.padding_side: PaddingSide = _check_side(padding_side)
        self.n_ctx = n_ctx
        self.name = name
        self.chat_template = chat_template
        for label, value in (("bos_id", bos_id), ("eos_id", eos_id), ("pad_id", self.pad_id)):
            if value is not None and not 0 <= value < backend.get_vocab_size(with_added_tokens=True):
                raise ValueError(
                    f"{label}={value} is outside the vocabulary of {self.vocab_size} tokens ({self._label()})"
                )

    @property
    def vocab_size(self) -> int:
        """Number of token ids, added tokens included."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    @property
    def prepends_bos(self) -> bool:
        """Whether encoding adds a BOS token when ``prepend_bos`` is not given."""
        if self.bos_id is None:
            return False
        if self.default_prepend_bos is not None:
            return self.default_prepend_bos
        encoding = self.backend.encode("a", add_special_tokens=True)
        return bool(encoding.ids) and encoding.ids[0] == self.bos_id and encoding.special_tokens_mask[0] == 1

    def to_tokens(
        self,
        text: str | Sequence[str],
        *,
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
    ) -> Tokens:
        """Tokenize one text or a batch, padded to the longest.

        Args:
            text: a string (a batch of one) or a sequence of strings.
            prepend_bos: ``None`` encodes as the checkpoint intends (see :attr:`prepends_bos`); ``True`` makes
                sure each row starts with BOS; ``False`` removes a BOS that the tokenizer would add.
            padding_side: ``"right"`` or ``"left"``; defaults to ``self.padding_side``.

        Returns:
            :class:`Tokens`; unpack as ``ids, mask`` (both ``[batch, pos]``).

        Raises:
            ValueError: an empty batch, a text that yields no tokens, a text longer than ``n_ctx`` tokens, or
                ``prepend_bos=True`` for a vocabulary without a BOS token.
        """
        texts = _as_texts(text)
        side = _check_side(padding_side if padding_side is not None else self.padding_side)
        if prepend_bos is None:
            prepend_bos = self.default_prepend_bos
        if prepend_bos and self.bos_id is None:
            raise ValueError(f"prepend_bos=True, but this tokenizer has no BOS token ({self._label()})")
        rows = [self._row(e, prepend_bos) for e in self.backend.encode_batch(list(texts))]
        for index, (ids, _, _) in enumerate(rows):
            self._check_length(index, texts[index], len(ids))
        length = max(len(ids) for ids, _, _ in rows)
        out_ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)  # [batch, pos]
        mask = torch.zeros((len(rows), length), dtype=torch.long)  # [batch, pos]
        offsets = torch.zeros((len(rows), length, 2), dtype=torch.long)  # [batch, pos, 2]
        special = torch.zeros((len(rows), length), dtype=torch.bool)  # [batch, pos]
        for b, (ids, offs, spec) in enumerate(rows):
            cols = slice(length - len(ids), length) if side == "left" else slice(0, len(ids))
            out_ids[b, cols] = torch.tensor(ids, dtype=torch.long)
            mask[b, cols] = 1
            offsets[b, cols] = torch.tensor(offs, dtype=torch.long).reshape(-1, 2)
            special[b, cols] = torch.tensor(spec, dtype=torch.bool)
        return Tokens(out_ids, mask, offsets, special, texts, side)

    @property
    def special_ids(self) -> frozenset[int]:
        """The ids of the vocabulary's special tokens (BOS, EOS, padding, chat turn markers...), wherever they
        occur: a special token written in the text is one too."""
        return frozenset(i for i, t in self.backend.get_added_tokens_decoder().items() if t.special)

    def chat_text(self, messages: Sequence[Any], *, add_generation_prompt: bool = True) -> str:
        """The prompt text the checkpoint's chat template makes of ``messages`` (mappings with ``role`` and
        ``content``), as ``transformers``' ``apply_chat_template`` renders it (:mod:`interp.chat_template`).

        Raises:
            ValueError: the tokenizer has no chat template, or the template refuses the messages.
        """
        if self.chat_template is None:
            raise ValueError(
                f"{self._label()} has no chat template, so it cannot turn messages into a prompt; give the "
                "prompt as text"
            )
        from interp.chat_template import render_chat

        names = {"bos": self.bos_id, "eos": self.eos_id, "pad": self.pad_id}
        special = {f"{k}_token": None if i is None else self.backend.id_to_token(i) for k, i in names.items()}
        return render_chat(
            self.chat_template, messages, add_generation_prompt=add_generation_prompt, special_tokens=special
        )

    def chat_tokens(self, messages: Sequence[Any], *, add_generation_prompt: bool = True) -> Tokens:
        """:meth:`chat_text` encoded as the template wrote it: no special token added, the template's own kept
        (as ``apply_chat_template(..., tokenize=True)``), a batch of one."""
        text = self.chat_text(messages, add_generation_prompt=add_generation_prompt)
        encoding = self.backend.encode(text, add_special_tokens=False)
        self._check_length(0, text, len(encoding.ids))
        special = self.special_ids
        ids = torch.tensor([encoding.ids], dtype=torch.long)  # [1, pos]
        return Tokens(
            ids,
            torch.ones_like(ids),
            torch.tensor([encoding.offsets], dtype=torch.long).reshape(1, -1, 2),
            torch.tensor([[i in special for i in encoding.ids]], dtype=torch.bool),
            (text,),
            "right",
        )

    def to_str_tokens(
        self, text: str | Sequence[str] | Sequence[int] | torch.Tensor, *, prepend_bos: bool | None = None
    ) -> list[str] | list[list[str]]:
        """Each token as a string, e.g. ``['The', ' animal', ...]`` (special tokens spelled out, no padding).

        Args:
            text: a string, a list of strings (one list per text), or token ids (a 1-D tensor or list).
            prepend_bos: as in :meth:`to_tokens` (ignored for ids).
        """
        if isinstance(text, torch.Tensor) or (
            not isinstance(text, str) and text and isinstance(text[0], int)
        ):
            ids = text.tolist() if isinstance(text, torch.Tensor) else list(text)
            if ids and isinstance(ids[0], list):
                raise ValueError("to_str_tokens takes a 1-D sequence of ids; call it once per row")
            return self.backend.decode_batch([[i] for i in ids], skip_special_tokens=False)
        tokens = self.to_tokens(text, prepend_bos=prepend_bos, padding_side="right")
        rows = [
            self.backend.decode_batch([[i] for i in ids[: int(m.sum())]], skip_special_tokens=False)
            for ids, m in zip(tokens.ids.tolist(), tokens.mask, strict=True)
        ]
        return rows[0] if isinstance(text, str) else rows

    def decode(
        self, ids: Sequence[int] | torch.Tensor, *, skip_special_tokens: bool = False
    ) -> str | list[str]:
        """Text for a 1-D sequence of ids, or a list of texts for a 2-D ``[batch, pos]`` tensor."""
        if isinstance(ids, torch.Tensor):
            if ids.ndim == 2:
                return self.backend.decode_batch(ids.tolist(), skip_special_tokens=skip_special_tokens)
            ids = ids.tolist()
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def char_span_to_token_positions(
        self, text: str, start: int, end: int, *, prepend_bos: bool | None = None
    ) -> list[int]:
        """Positions of the tokens covering characters ``[start, end)`` of ``text``, tokenized alone.

        The positions index ``self.to_tokens(text, prepend_bos=prepend_bos).ids[0]``. For a padded batch, use
        :meth:`Tokens.span_positions` on the batch instead.
        """
        return self.to_tokens(text, prepend_bos=prepend_bos).span_positions(start, end)

    def substring_positions(
        self, text: str, substring: str, occurrence: int = 0, *, prepend_bos: bool | None = None
    ) -> list[int]:
        """Positions of the tokens covering the ``occurrence``-th ``substring`` of ``text``.

        See :func:`find_span` for how the substring is matched.
        """
        start, end = find_span(text, substring, occurrence)
        return self.char_span_to_token_positions(text, start, end, prepend_bos=prepend_bos)

    def to_json(self) -> str:
        """This tokenizer as JSON (the backend's serialization and the special ids); see :meth:`from_json`."""
        fields = {
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "pad_id": self.pad_id,
            "prepend_bos": self.default_prepend_bos,
            "padding_side": self.padding_side,
            "n_ctx": self.n_ctx,
            "name": self.name,
            "chat_template": self.chat_template,
        }
        return json.dumps({"backend": json.loads(self.backend.to_str()), **fields})

    @classmethod
    def from_json(cls, text: str) -> Tokenizer:
        """The tokenizer that :meth:`to_json` wrote."""
        fields = json.loads(text)
        backend = tokenizers.Tokenizer.from_str(json.dumps(fields.pop("backend")))
        return cls(backend, **fields)

    def _row(self, encoding: tokenizers.Encoding, prepend_bos: bool | None) -> tuple[list, list, list]:
        ids, offsets, special = list(encoding.ids), list(encoding.offsets), list(encoding.special_tokens_mask)
        has_bos = bool(ids) and ids[0] == self.bos_id and special[0] == 1
        if prepend_bos and not has_bos:
            ids, offsets, special = [self.bos_id, *ids], [(0, 0), *offsets], [1, *special]
        elif prepend_bos is False and has_bos:
            ids, offsets, special = ids[1:], offsets[1:], special[1:]
        return ids, offsets, special

    def _check_length(self, index: int, text: str, n_tokens: int) -> None:
        if n_tokens == 0:
            raise ValueError(
                f"text {index} ({text!r}) gives no tokens; pass a non-empty text or prepend_bos=True"
            )
        if self.n_ctx is not None and n_tokens > self.n_ctx:
            preview = text if len(text) <= 60 else text[:57] + "..."
            raise ValueError(
                f"text {index} ({preview!r}) is {n_tokens} tokens long, more than the model's context "
                f"n_ctx={self.n_ctx}; shorten or split it"
            )

    def _label(self) -> str:
        return self.name or "tokenizer"

    def __repr__(self) -> str:
        return (
            f"Tokenizer({self._label()!r}, vocab_size={self.vocab_size}, bos_id={self.bos_id}, "
            f"eos_id={self.eos_id}, pad_id={self.pad_id}, prepends_bos={self.prepends_bos}, "
            f"n_ctx={self.n_ctx})"
        )


def _as_texts(text: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(text, (bytes, bytearray)):
        raise TypeError(
            f"text is {type(text).__name__} ({text[:40]!r}); pass a str, such as text.decode('utf-8')"
        )
    if isinstance(text, torch.Tensor):
        raise TypeError(
            "text is a Tensor; to_tokens takes text (a str or a list of str): pass token ids to the model"
        )
    if not isinstance(text, (str, Iterable)) or isinstance(text, Mapping):
        raise TypeError(f"text is {text!r} ({type(text).__name__}); pass a str or a list of str")
    texts = (text,) if isinstance(text, str) else tuple(text)
    if not texts:
        raise ValueError("to_tokens got an empty batch; pass a string or a non-empty list of strings")
    for index, item in enumerate(texts):
        if not isinstance(item, str):
            raise TypeError(
                f"text {index} of the batch is {type(item).__name__} ({item!r}); every text must be a str"
            )
    return texts


def _check_side(side: str) -> PaddingSide:
    if side not in ("left", "right"):
        raise ValueError(f"padding_side={side!r}; expected 'left' or 'right'")
    return side  # type: ignore[return-value]
