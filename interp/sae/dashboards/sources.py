"""Where a dashboard pass reads its tokens: a text corpus run through the model, or an activation store.

Both give batches of whole items (every kept token of an item in one batch, item by item, positions ascending),
so an example's window never crosses a batch, and each batch's :meth:`Batch.feed` hands every layer's input
rows to a function: from the corpus through a forward pass with one hook per input hook (stopped after the
last block read), from the store by reading its rows. Progress is a small dict (the next batch, or the next
row of the store, and the tokens read), saved with each checkpoint, from which the same batches follow.

``max_tokens`` cuts the data after its first ``max_tokens`` tokens (special tokens included; an item cut
short keeps its first tokens, which is exact for a causal model). The first ``skip_first`` positions of each
item (the special token every item starts with) are read but not counted or shown.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from interp.sae.dashboards.collector import Rows
from interp.store.batches import text_of

Feed = Callable[[int, torch.Tensor], None]
"""``fn(layer, rows)``: one layer's input rows ``[rows, ...]`` for the batch."""


@dataclass
class Batch:
    """One batch of whole items: its rows, how to feed each layer's inputs, and the progress after it."""

    rows: Rows
    feed: Callable[[Feed], None]
    progress: dict[str, int]
    n_read: int


class TokenTexts:
    """Token codes and their texts: a corpus's codes are token ids (decoded by the tokenizer, or shown as
    numbers without one); a store's are numbers given to the texts its index holds, in a table bounded by the
    vocabulary, not the corpus."""

    def __init__(self, tokenizer: Any = None, *, ids: bool = False) -> None:
        self.tokenizer, self.ids = tokenizer, ids
        self.table: list[str] = []
        self._codes: dict[str, int] = {}
        self._decoded: dict[int, str] = {}  # ids decoded so far

    def codes(self, texts: Sequence[str | None]) -> torch.Tensor:
        """Codes for token texts (a store's), numbering texts not seen before."""
        import pandas as pd

        labels, uniques = pd.factorize(pd.Series(["" if t is None else str(t) for t in texts], dtype=object))
        mapped = []
        for text in uniques:
            code = self._codes.get(text)
            if code is None:
                code = self._codes[text] = len(self.table)
                self.table.append(text)
            mapped.append(code)
        return torch.tensor(mapped, dtype=torch.long)[torch.from_numpy(labels).long()]

    def texts(self, codes: Sequence[int]) -> dict[int, str]:
        """Code -> text for ``codes`` (``-1`` is not a token and is left out)."""
        wanted = sorted({int(c) for c in codes if c >= 0})
        if not self.ids:
            return {c: self.table[c] for c in wanted}
        if self.tokenizer is None:
            return {c: str(c) for c in wanted}
        new = [c for c in wanted if c not in self._decoded]
        if new:
            self._decoded.update(zip(new, self.tokenizer.to_str_tokens(new), strict=True))
        return {c: self._decoded[c] for c in wanted}

    def state(self) -> list[str]:
        return list(self.table)

    def load(self, table: Sequence[str]) -> None:
        self.table = list(table)
        self._codes = {t: i for i, t in enumerate(self.table)}


@dataclass
class CorpusSource:
    """Items run through ``model`` in batches: texts (or records with ``text``), each tokenized on its own with
    the model's special token first (its BOS, else its padding, else its end-of-sequence token), as attribution
    graphs put it; or pre-tokenized batches ``(ids, mask)``, used as they are. ``hooks``: layer -> the input
    hook the dictionary reads there."""

    model: Any
    hooks: Mapping[int, str]
    items: Sequence[Any]
    batch_size: int = 16
    max_tokens: int | None = None
    skip_first: int = 1
    texts: TokenTexts = field(init=False)

    def __post_init__(self) -> None:
        self.items = list(self.items)
        if not self.items:
            raise ValueError("the data set is empty; give at least one text")
        self.kind = "texts" if isinstance(self.items[0], (str, Mapping)) else "tokens"
        tokenizer = getattr(self.model, "tokenizer", None)
        if self.kind == "texts" and tokenizer is None:
            raise ValueError("the data holds text, but the model has no tokenizer; pass (ids, mask) batches")
        self.texts = TokenTexts(tokenizer, ids=True)
        self.by_hook = {hook: layer for layer, hook in self.hooks.items()}
        self._read: tuple[str, int] | None = None
        blocks = [_block(h) for h in self.hooks.values()]
        self.stop = None if None in blocks else max(blocks) + 1  # blocks after the last one read are not run

    def n_batches(self) -> int:
        """The number of batches."""
        return len(self.items) if self.kind == "tokens" else -(-len(self.items) // self.batch_size)

    def read_through(self, on_batch: Callable[[], None] | None = None) -> tuple[str, int]:
        """Tokenize every batch once: the sha256 of the ids and masks, and the number of tokens (calling
        ``on_batch`` after each batch). Kept, so a second call costs nothing."""
        if self._read is None:
            h, tokens = hashlib.sha256(), 0
            for _, _, ids, mask in self._batches(0):
                h.update(ids.numpy().tobytes() + mask.numpy().tobytes())
                tokens += int(mask.sum())
                if on_batch is not None:
                    on_batch()
            self._read = (h.hexdigest(), tokens)
        return self._read

    def total_tokens(self) -> int:
        """The tokens the pass reads: every real token, or the first ``max_tokens``."""
        tokens = self.read_through()[1]
        return tokens if self.max_tokens is None else min(tokens, self.max_tokens)

    def identity(self) -> dict[str, Any]:
        """What the batches depend on, for a resumed run to compare."""
        n = len(self.items) if self.kind == "texts" else sum(len(b[0]) for b in self.items)
        return {
            "kind": self.kind,
            "n_items": n,
            "sha256": self.read_through()[0],
            "batch_size": self.batch_size,
        }

    def _batches(self, start: int) -> Iterator[tuple[int, int, torch.Tensor, torch.Tensor]]:
        """``(number, first item, ids, mask)`` from batch ``start`` on."""
        if self.kind == "tokens":
            first = 0
            for number, batch in enumerate(self.items):
                ids, mask = (batch, None) if isinstance(batch, torch.Tensor) else batch
                mask = torch.ones_like(ids) if mask is None else mask
                if number >= start:
                    yield number, first, ids.cpu(), mask.cpu().long()
                first += len(ids)
            return
        for number in range(start, -(-len(self.items) // self.batch_size)):
            lo = number * self.batch_size
            ids, mask = special_first(
                self.model.tokenizer,
                [text_of(r, lo + i) for i, r in enumerate(self.items[lo : lo + self.batch_size])],
            )
            yield number, lo, ids, mask

    def batches(self, progress: dict[str, int]) -> Iterator[Batch]:
        """The batches after ``progress`` (``{"batch": next batch, "tokens": tokens read}``)."""
        read = progress.get("tokens", 0)
        for number, first_item, ids, mask in self._batches(progress.get("batch", 0)):
            if self.max_tokens is not None and read >= self.max_tokens:
                return
            mask = mask.bool()  # [batch, pos]
            order = mask.long().flatten().cumsum(0).reshape(mask.shape) - 1 + read  # each token's number
            keep = mask & (order < self.max_tokens) if self.max_tokens is not None else mask.clone()
            n_read = int(keep.sum())
            position = mask.long().cumsum(1) - 1
            keep &= position >= self.skip_first
            b, p = keep.nonzero(as_tuple=True)
            rows = Rows.of(b + first_item, position[b, p], ids[b, p])
            read += n_read
            after = {"batch": number + 1, "tokens": read}
            yield Batch(rows, self._feeder(ids, mask, keep), after, n_read)

    def _feeder(self, ids: torch.Tensor, mask: torch.Tensor, keep: torch.Tensor) -> Callable[[Feed], None]:
        device = self.model.device

        def feed(fn: Feed) -> None:
            kept = keep.to(device)

            def hook(x: torch.Tensor, hook: Any) -> None:
                fn(self.by_hook[hook.name], x[kept])

            with torch.no_grad():
                self.model.run_with_hooks(
                    ids.to(device),
                    mask.long().to(device),
                    fwd_hooks=[(list(self.by_hook), hook)],
                    stop_at_layer=self.stop,
                )

        return feed


def special_first(tokenizer: Any, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` of ``texts`` padded on the right, each tokenized without special tokens and started with
    the tokenizer's BOS token (else its padding, else its end-of-sequence token; none if it has none)."""
    tokens = tokenizer.to_tokens(list(texts), prepend_bos=False, padding_side="right")
    ids, mask = tokens.ids.cpu(), tokens.mask.cpu().long()
    special = next((i for i in (tokenizer.bos_id, tokenizer.pad_id, tokenizer.eos_id) if i is not None), None)
    if special is None:
        return ids, mask
    pad = tokenizer.pad_id if tokenizer.pad_id is not None else special
    out = torch.full((ids.shape[0], ids.shape[1] + 1), pad, dtype=torch.long)
    out[:, 0], out[:, 1:] = special, ids
    return out, torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1)


@dataclass
class StoreSource:
    """The rows of an activation store that holds the dictionary's input hooks (``hooks``: layer -> hook), every
    position of each item, moved to ``device``."""

    store: Any
    hooks: Mapping[int, str]
    device: torch.device
    max_tokens: int | None = None
    skip_first: int = 1
    texts: TokenTexts = field(default_factory=TokenTexts)

    def total_tokens(self) -> int:
        """The rows (tokens) the pass reads: every row of the store, or the first ``max_tokens``."""
        return len(self.store) if self.max_tokens is None else min(len(self.store), self.max_tokens)

    def identity(self) -> dict[str, Any]:
        meta = self.store.meta
        return {
            "kind": "store",
            "rows": len(self.store),
            "data_fingerprint": meta.get("data_fingerprint"),
            "model": meta["identity"]["model"].get("fingerprint"),
        }

    def batches(self, progress: dict[str, int]) -> Iterator[Batch]:
        """Chunks of whole items from ``progress["row"]`` on; an item split across shards waits for its end."""
        import numpy as np

        start = progress.get("row", 0)
        stop = len(self.store) if self.max_tokens is None else min(len(self.store), self.max_tokens)
        hooks = dict(self.hooks)
        carry: dict[str, Any] | None = None
        for shard, file in zip(self.store, self.store.shards, strict=True):
            lo, hi = max(start, file.start), min(stop, file.start + file.rows)
            if hi <= lo:
                if file.start >= stop:
                    break
                continue
            local = slice(lo - file.start, hi - file.start)
            part = {
                "row": np.arange(lo, hi),
                "item": np.array(shard.index["item"].to_numpy()[local]),
                "position": np.array(shard.index["position"].to_numpy()[local]),
                "token": self.texts.codes(shard.index["token"].tolist()[local]),
                **{hook: shard.tensors[hook][local] for hook in set(hooks.values())},
            }
            carry = part if carry is None else {k: _cat(carry[k], part[k]) for k in part}
            last = hi >= stop or file.number == len(self.store.shards) - 1
            if last:
                ready, carry = carry, None
            else:
                items = carry["item"]
                cut = int(np.searchsorted(items, items[-1], side="left"))  # the last item may go on
                if cut == 0:
                    continue
                ready, carry = {k: v[:cut] for k, v in carry.items()}, {k: v[cut:] for k, v in carry.items()}
            yield self._batch(ready, hooks)
            if last:
                return
        if carry is not None and len(carry["item"]):
            yield self._batch(carry, hooks)

    def _batch(self, part: dict[str, Any], hooks: dict[int, str]) -> Batch:
        position = torch.as_tensor(part["position"]).long()
        keep = position >= self.skip_first
        rows = Rows.of(torch.as_tensor(part["item"]).long()[keep], position[keep], part["token"][keep])
        device = self.device

        def feed(fn: Feed) -> None:
            for layer, hook in hooks.items():
                fn(layer, part[hook][keep].to(device))

        end = int(part["row"][-1]) + 1
        return Batch(rows, feed, {"row": end, "tokens": end}, len(position))


def _cat(a: Any, b: Any) -> Any:
    import numpy as np

    return torch.cat([a, b]) if isinstance(a, torch.Tensor) else np.concatenate([a, b])


def _block(hook: str) -> int | None:
    """The block a hook is in (``blocks.L....``), or ``None`` for one outside every block."""
    parts = hook.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "blocks" and parts[1].isdigit() else None
