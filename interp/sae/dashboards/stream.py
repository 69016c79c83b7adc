"""The pass: every batch's layer inputs encoded once and folded into a :class:`Collector`; ``collect`` runs it in
memory.

Memory is the tables plus one batch: the collector's size is fixed by the features and the examples kept, and
with glibc what each batch frees is handed back after it (:func:`run_pass`), so the resident peak does not grow
with the tokens read, whatever ran before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from interp.allocator import heap_trim
from interp.dictionary import SparseDictionary
from interp.feature_id import FeatureId
from interp.sae.dashboards.collector import Collector, Settings
from interp.sae.dashboards.data import Data
from interp.sae.dashboards.reading import Reading
from interp.sae.dashboards.schema import FeatureFile
from interp.sae.dashboards.sources import Batch

CHUNK = 1024
"""Features whose files are made at once."""


def run_pass(
    collector: Collector,
    dictionary: SparseDictionary,
    batches: Iterable[Batch],
    *,
    after_batch: Callable[[Batch], None] | None = None,
) -> None:
    """Feed every batch's layers through the dictionary into ``collector``; with glibc, hand the heap's free
    pages back after each batch (:mod:`interp.allocator`), so that what a batch freed leaves the resident set,
    which is then the tables plus the batch under way, whatever ran before."""
    trim = heap_trim()
    for batch in batches:
        rows = batch.rows.to(collector.count.device)

        def fold(layer: int, x: torch.Tensor, rows=rows) -> None:
            with torch.no_grad():
                collector.update(layer, dictionary.encode(x, layer)[1], rows)

        batch.feed(fold)
        collector.add_tokens(len(rows))
        if trim is not None:
            trim(0)
        if after_batch is not None:
            after_batch(batch)


def files_of(
    collector: Collector, model: Any, dictionary: SparseDictionary, texts: Any, scan: str
) -> Iterable[list[FeatureFile]]:
    """Every feature's file, :data:`CHUNK` features at a time, in the collector's order."""
    from interp.sae.dashboards.feature_files import feature_files

    for start in range(0, collector.n, CHUNK):
        yield feature_files(collector, model, dictionary, texts, scan, start, min(start + CHUNK, collector.n))


@dataclass
class Collected:
    """The result of :func:`collect`: the tables, the token texts and the dictionary they were read with."""

    collector: Collector
    texts: Any
    dictionary: SparseDictionary

    def records(self, model: Any, scan: str = "dictionary") -> list[FeatureFile]:
        """Every feature's :class:`~interp.sae.dashboards.schema.FeatureFile` (see :mod:`.feature_files`)."""
        return [
            f for chunk in files_of(self.collector, model, self.dictionary, self.texts, scan) for f in chunk
        ]


def collect(
    model: Any,
    dictionary: Any,
    data: Any,
    *,
    settings: Settings | None = None,
    features: Iterable[FeatureId | tuple[int, int]] | None = None,
) -> Collected:
    """One pass over ``data``: the :class:`Collector` of every (or each chosen) feature, in memory.

    Args:
        model: the model (it runs the texts; its tokenizer names the tokens).
        dictionary: any :class:`~interp.dictionary.SparseDictionary` (an SAE set, a per-layer transcoder set,
            a cross-layer transcoder), or an :class:`~interp.sae.SAE`.
        data: :class:`~interp.sae.dashboards.data.Data`, or what :meth:`Data.of` reads as one: texts (or records,
            or ``(ids, mask)`` batches), or an activation store.
        settings: what to keep per feature.
        features: features (:class:`~interp.feature_id.FeatureId` or ``(layer, feature)``); default: all.
    """
    reading = Reading.of(dictionary, features, model)
    source = Data.of(data).open(model, reading)
    collector = reading.collector(settings or Settings())
    run_pass(collector, reading.dictionary, source.batches({}))
    return Collected(collector, source.texts, reading.dictionary)
