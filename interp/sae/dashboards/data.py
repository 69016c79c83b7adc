"""Where a dashboard pass reads its tokens, and how many: :class:`Data`, opened for a reading as a source.

Texts (or records with ``text``, or ``(ids, mask)`` batches) are run through the model; an activation store of
the dictionary's input hooks is read instead (checked by :func:`interp.preflight.check_store`). Either way the
pass may stop after ``max_tokens`` tokens, and leaves out each item's first ``skip_first`` positions (by
default 1 where every item starts with a special token).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp.sae.dashboards.reading import Reading
from interp.sae.dashboards.sources import CorpusSource, StoreSource


@dataclass(frozen=True)
class Data:
    """The tokens a pass reads.

    Attributes:
        texts: texts, or records with ``text`` (each item its own sequence), or ``(ids, mask)`` batches.
        store: an :class:`~interp.store.ActivationStore` (or its folder) of the dictionary's input hooks.
        max_tokens: read only the first this many tokens (``None``: all).
        batch_size: items per forward pass (texts).
        skip_first: leading positions of each item not counted (``None``: 1 after a special token, else 0).
    """

    texts: Sequence[Any] | None = None
    store: Any = None
    max_tokens: int | None = None
    batch_size: int = 16
    skip_first: int | None = None

    def __post_init__(self) -> None:
        if (self.texts is None) == (self.store is None):
            raise ValueError("give exactly one of texts and store (an activation store)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens}; it must be at least 1 (or None for every token)")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size}; it must be at least 1")
        if self.skip_first is not None and self.skip_first < 0:
            raise ValueError(f"skip_first={self.skip_first}; it must be 0 or more (or None for the default)")

    @classmethod
    def of(cls, data: Any) -> Data:
        """``data`` as :class:`Data`: itself; an activation store (or a path to one) as its store; texts,
        records or batches as its texts."""
        from interp.store import ActivationStore

        if isinstance(data, Data):
            return data
        if isinstance(data, (ActivationStore, os.PathLike)):
            return cls(store=data)
        if isinstance(data, (str, bytes)) or not isinstance(data, Sequence):
            raise TypeError(
                f"data is a {type(data).__name__}; give a list of texts (or records, or (ids, mask) batches), an "
                "activation store's folder as a Path, or Data(texts=..., store=...)"
            )
        return cls(texts=data)

    def open(self, model: Any, reading: Reading) -> CorpusSource | StoreSource:
        """The source of a pass of ``reading``; a store is checked to hold every position of the reading's
        input hooks, written by ``model`` (when given)."""
        if self.store is not None:
            from interp.preflight import check_store

            store = check_store(self.store, flag="store", hooks=reading.hooks.values(), model=model)
            source: CorpusSource | StoreSource = StoreSource(
                store, reading.hooks, reading.device, self.max_tokens
            )
        else:
            source = CorpusSource(model, reading.hooks, self.texts, self.batch_size, self.max_tokens)
        source.skip_first = default_skip_first(model, source) if self.skip_first is None else self.skip_first
        return source


def default_skip_first(model: Any, source: CorpusSource | StoreSource) -> int:
    """The leading positions not counted: 1 where each item starts with a special token (texts, which get one
    first; a store cached with a tokenizer that puts one first), else 0."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return 0
    if isinstance(source, CorpusSource):
        has = any(i is not None for i in (tokenizer.bos_id, tokenizer.pad_id, tokenizer.eos_id))
        return int(source.kind == "texts" and has)
    return int(bool(getattr(tokenizer, "prepends_bos", False)))
