"""The items of a cache run, in deterministic batches, and the token positions kept from each.

Batch ``k`` always holds the same items (texts: ``items[k*batch_size : (k+1)*batch_size]``; pre-tokenized
data: the k-th batch given), so a resumed run recomputes exactly the forwards an uninterrupted run would,
with the same padding, and gets the same bits.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

TEXT_FIELDS = ("text", "sentence", "prompt")
Positions = Literal["all", "last"] | list[int]


@dataclass(frozen=True)
class Batch:
    """One forward pass worth of items.

    Attributes:
        number: the batch's place in the run (0, 1, ...), the unit of resuming and of sharding over ranks.
        first_item: the index of row 0's item in the whole data set.
        ids: token ids ``[batch, pos]``.
        mask: ``[batch, pos]``, 1 for real tokens, 0 for padding (either side).
        item_ids: the data's own id for each row, or ``None`` when it has none.
    """

    number: int
    first_item: int
    ids: torch.Tensor
    mask: torch.Tensor
    item_ids: tuple[Any, ...] | None = None

    def digest(self) -> bytes:
        """A hash of what goes into the model (ids, mask) and of the item ids."""
        h = hashlib.sha256()
        h.update(json.dumps([self.first_item, list(self.ids.shape), self.item_ids]).encode())
        h.update(self.ids.to(torch.int64).contiguous().numpy().tobytes())
        h.update(self.mask.to(torch.int64).contiguous().numpy().tobytes())
        return h.digest()


class BatchSource:
    """Deterministic batches over texts, records or pre-tokenized batches.

    Args:
        data: a sequence of strings; a sequence of mappings with a ``text`` (or ``sentence``/``prompt``) field
            and an optional ``id``; or an iterable of pre-tokenized batches, each ``(ids, mask)`` or ``ids``
            (``[batch, pos]``).
        tokenizer: turns texts into padded batches (an :class:`interp.tokens.Tokenizer`).
        batch_size: items per batch for texts (pre-tokenized batches keep their own size).
    """

    def __init__(self, data: Sequence[Any] | Iterable[Any], tokenizer: Any, batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size}; it must be at least 1")
        if isinstance(data, (str, bytes, torch.Tensor)):
            raise TypeError(
                "data must be a list of texts or of (ids, mask) batches, not a single string or tensor"
            )
        if not isinstance(data, Sequence):
            data = iter(data)
            try:
                first = next(data)
            except StopIteration:
                raise ValueError("the data set is empty") from None
            data = itertools.chain([first], data)
        elif not data:
            raise ValueError("the data set is empty")
        else:
            first = data[0]
        self.data = data
        self.kind = "texts" if isinstance(first, (str, Mapping)) else "tokens"
        self.batch_size = batch_size if self.kind == "texts" else None
        if self.kind == "texts" and tokenizer is None:
            raise ValueError(
                "the data holds text, but the model has no tokenizer; load the model with interp.load(...) "
                "or pass pre-tokenized batches [(ids, mask), ...]"
            )
        if self.kind == "texts" and not isinstance(data, Sequence):
            raise TypeError("texts must come as a sequence (a list), so that every run batches them alike")
        if self.kind == "texts":
            for index, record in enumerate(data):
                text_of(record, index)
        self.tokenizer = tokenizer

    @property
    def sized(self) -> bool:
        return isinstance(self.data, Sequence)

    def n_batches(self) -> int | None:
        """How many batches, or ``None`` for an iterator of pre-tokenized batches."""
        if not self.sized:
            return None
        return -(-len(self.data) // self.batch_size) if self.kind == "texts" else len(self.data)

    def n_items(self) -> int | None:
        """How many items, or ``None`` for an iterator of pre-tokenized batches."""
        if not self.sized:
            return None
        return len(self.data) if self.kind == "texts" else sum(_as_pair(b)[0].shape[0] for b in self.data)

    def batches(self, start: int = 0, stop: int | None = None) -> Iterator[Batch]:
        """Batches ``start`` to ``stop`` (exclusive; ``None``: to the end)."""
        if self.kind == "texts":
            stop = self.n_batches() if stop is None else stop
            for number in range(start, stop):
                yield self._text_batch(number)
            return
        first_item = 0
        for number, raw in enumerate(self.data):
            if stop is not None and number >= stop:
                return
            ids, mask = _as_pair(raw)
            if number >= start:
                yield Batch(number, first_item, ids, mask)
            first_item += ids.shape[0]

    def check(self, positions: Positions) -> None:
        """Tokenize every batch of a sized source and check that each item has ``positions``.

        Raises:
            ValueError: an item gives no tokens, is longer than the model's context, or lacks a position.
        """
        if self.sized:
            for batch in self.batches():
                select_rows(batch, positions)

    def _text_batch(self, number: int) -> Batch:
        lo = number * self.batch_size
        records = self.data[lo : lo + self.batch_size]
        texts = [text_of(record, lo + i) for i, record in enumerate(records)]
        try:
            ids, mask = self.tokenizer.to_tokens(texts)
        except ValueError as err:  # the tokenizer counts texts within the batch; name the data item
            message = re.sub(r"^text (\d+)", lambda m: f"item {lo + int(m.group(1))}", str(err))
            raise ValueError(message) from None
        item_ids = tuple(r.get("id") if isinstance(r, Mapping) else None for r in records)
        has_ids = any(i is not None for i in item_ids)
        return Batch(number, lo, ids.cpu(), mask.cpu(), item_ids if has_ids else None)


def text_of(record: Any, index: int) -> str:
    """The text of data item ``index``: the string itself, or a record's ``text`` (``sentence``, ``prompt``)."""
    if isinstance(record, str):
        return record
    if isinstance(record, Mapping):
        for field in TEXT_FIELDS:
            if isinstance(record.get(field), str):
                return record[field]
        raise ValueError(
            f"item {index} has none of the text fields {list(TEXT_FIELDS)}; its keys: {sorted(record)}"
        )
    raise TypeError(f"item {index} is a {type(record).__name__}; expected a string or a mapping with 'text'")


def _as_pair(raw: Any) -> tuple[torch.Tensor, torch.Tensor]:
    ids, mask = (raw, None) if isinstance(raw, torch.Tensor) else tuple(raw)
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2:
        raise ValueError(
            f"a pre-tokenized batch must be ids [batch, pos] or (ids, mask); got {type(ids).__name__}"
        )
    mask = torch.ones_like(ids) if mask is None else mask
    if mask.shape != ids.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match ids shape {tuple(ids.shape)}")
    return ids.cpu(), mask.cpu().long()


def check_positions(positions: Any) -> Positions:
    """``"all"``, ``"last"`` or a non-empty list of ints (negative counts from each item's end)."""
    if positions in ("all", "last"):
        return positions
    if isinstance(positions, int) or not isinstance(positions, Sequence) or isinstance(positions, str):
        raise ValueError(f"positions={positions!r}; expected 'all', 'last' or a list of ints such as [0, -1]")
    values = list(positions)
    if not values or not all(isinstance(p, int) and not isinstance(p, bool) for p in values):
        raise ValueError(f"positions={positions!r}; expected a non-empty list of ints such as [0, -1]")
    return values


def select_rows(batch: Batch, positions: Positions) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which ``(row, column)`` of the padded batch each stored row comes from, and its position in its item.

    Rows come out item by item, and within an item in the order of ``positions`` (ascending for ``"all"``).
    Positions count real tokens only, so they are the same under left and right padding.

    Returns:
        ``(row, column, position)``, each a LongTensor ``[rows]``.

    Raises:
        ValueError: a listed position is outside an item (nothing asked for is silently dropped).
    """
    mask = batch.mask.bool()  # [batch, pos]
    if positions == "all":
        row, col = mask.nonzero(as_tuple=True)
        return row, col, mask.long().cumsum(1)[row, col] - 1
    wanted = [-1] if positions == "last" else positions
    rows, cols, poss = [], [], []
    for b in range(mask.shape[0]):
        real = mask[b].nonzero().flatten()  # columns of the real tokens, in order
        for p in wanted:
            q = p + len(real) if p < 0 else p
            if not 0 <= q < len(real):
                raise ValueError(
                    f"item {batch.first_item + b} has {len(real)} tokens; position {p} is outside it "
                    f"(positions={positions}); pick positions every item has, e.g. [0, -1]"
                )
            rows.append(b)
            cols.append(int(real[q]))
            poss.append(q)
    return torch.tensor(rows), torch.tensor(cols), torch.tensor(poss)
