"""``collect`` (the pass) and ``write_dashboards`` (the pass, resumable, then every feature's file and the page).

The pass reads each batch once: every layer's input rows are encoded and folded into the :class:`Collector`,
whose size is fixed by the features and the examples kept; with glibc, what each batch frees is handed back
(see :func:`run_pass`), so the pass's resident peak is the tables plus one batch, whatever the tokens.
``write_dashboards`` checkpoints the collector every ``checkpoint_seconds`` (and when the pass ends), so a run
that stops continues from its last checkpoint with the same batches, and, the sample being a function of the
tokens alone, ends with the files an uninterrupted run writes. Then the records are made ``chunk`` features at a
time and written.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from interp.allocator import heap_trim
from interp.dictionary import SparseDictionary
from interp.sae.dashboards.collector import Collector, Settings
from interp.sae.dashboards.dictionary import as_dictionary, device_of, fingerprint, kind
from interp.sae.dashboards.folder import FORMAT, DashboardFolder
from interp.sae.dashboards.sources import Batch, CorpusSource, StoreSource

CHUNK = 1024
"""Features whose records are made at once."""


def choose_features(
    dictionary: SparseDictionary, features: Iterable[tuple[int, int]] | None
) -> dict[int, torch.Tensor]:
    """``(layer, feature)`` pairs as layer -> sorted features (``{}`` for all); each checked against the
    dictionary. The pass then reads only the layers named.

    Raises:
        ValueError: a layer without features, or a feature outside ``[0, n_features(layer))``.
    """
    if features is None:
        return {}
    chosen: dict[int, set[int]] = {}
    for layer, feature in features:
        if layer not in dictionary.layers:
            raise ValueError(
                f"--features {layer}:{feature}: the dictionary has no features at layer {layer}; its layers are "
                f"{list(dictionary.layers)}"
            )
        width = dictionary.n_features(layer)
        if not 0 <= feature < width:
            raise ValueError(
                f"--features {layer}:{feature}: feature {feature} is outside [0, {width}) (the dictionary has "
                f"{width} features at layer {layer})"
            )
        chosen.setdefault(layer, set()).add(int(feature))
    if not chosen:
        raise ValueError("--features is empty; give LAYER:FEATURE pairs such as 3:17,5:2")
    return {layer: torch.tensor(sorted(found)) for layer, found in chosen.items()}


@dataclass(frozen=True)
class Reading:
    """What a pass reads of a dictionary: the layers (all, or those of the chosen features), each layer's
    input hook and number of features, the chosen features, and where the dictionary computes."""

    dictionary: SparseDictionary
    layers: list[int]
    hooks: dict[int, str]
    widths: dict[int, int]
    chosen: dict[int, torch.Tensor]
    device: torch.device

    @classmethod
    def of(cls, dictionary: Any, features: Iterable[tuple[int, int]] | None, model: Any = None) -> Reading:
        """The reading of ``dictionary`` (any :class:`~interp.dictionary.SparseDictionary`, or an SAE) for
        ``features`` (``None``: every feature)."""
        dictionary = as_dictionary(dictionary)
        chosen = choose_features(dictionary, features)
        layers = sorted(chosen) if chosen else list(dictionary.layers)
        return cls(
            dictionary,
            layers,
            {layer: dictionary.input_hook(layer) for layer in layers},
            {layer: dictionary.n_features(layer) for layer in layers},
            chosen,
            device_of(dictionary, model),
        )

    def collector(self, settings: Settings) -> Collector:
        """An empty :class:`Collector` for this reading."""
        return Collector(self.layers, self.widths, settings, self.chosen, self.device)


def check_store(store: Any, hooks: Iterable[str], model: Any = None) -> None:
    """Raise unless ``store`` holds every one of ``hooks`` (the dictionary's input hooks), at every position,
    from ``model``."""
    hooks = sorted(set(hooks))
    missing = [h for h in hooks if h not in store.hook_names]
    if missing:
        raise ValueError(
            f"the store {store.folder} has no rows of {missing}, which the dictionary reads; it holds "
            f"{store.hook_names}. Cache them: interp cache MODEL --data FILE --hooks "
            f"'{','.join(hooks)}' --positions all --out DIR"
        )
    positions = store.meta["identity"].get("positions")
    if positions != "all":
        raise ValueError(
            f"the store {store.folder} keeps positions {positions!r}; dashboards show each example in its "
            "context, so they need every position (interp cache ... --positions all)"
        )
    if model is not None:
        from interp.store.meta import model_fingerprint

        stored = store.meta["identity"]["model"]
        if stored.get("fingerprint") != model_fingerprint(model):
            raise ValueError(
                f"the store {store.folder} was written by model {stored.get('name') or 'unnamed'} (fingerprint "
                f"{str(stored.get('fingerprint'))[:12]}), not by the model given; pass the model it was cached "
                "with"
            )


def make_source(
    model: Any,
    reading: Reading,
    *,
    data: Sequence[Any] | None,
    store: Any,
    batch_size: int,
    max_tokens: int | None,
    skip_first: int | None,
) -> CorpusSource | StoreSource:
    """The source of a pass: ``data`` (texts or records) through ``model``, or an activation ``store``;
    ``skip_first=None`` takes :func:`default_skip_first`."""
    if (data is None) == (store is None):
        raise ValueError("give exactly one of data (texts) and store (an activation store)")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens}; it must be at least 1")
    if store is not None:
        from interp.store import ActivationStore

        store = store if isinstance(store, ActivationStore) else ActivationStore(store)
        check_store(store, reading.hooks.values())
        source: CorpusSource | StoreSource = StoreSource(store, reading.hooks, reading.device, max_tokens)
    else:
        source = CorpusSource(model, reading.hooks, data, batch_size, max_tokens)
    source.skip_first = default_skip_first(model, source) if skip_first is None else skip_first
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


@dataclass
class Collected:
    """The result of :func:`collect`: the tables, the token texts and the dictionary they were read with."""

    collector: Collector
    texts: Any
    dictionary: SparseDictionary

    def records(self, model: Any, scan: str = "dictionary") -> list[dict[str, Any]]:
        """Every feature's record (see :mod:`.records`)."""
        from interp.sae.dashboards.records import feature_records

        c = self.collector
        return [
            r
            for s in range(0, c.n, CHUNK)
            for r in feature_records(c, model, self.dictionary, self.texts, scan, s, min(s + CHUNK, c.n))
        ]


def collect(
    model: Any,
    dictionary: Any,
    *,
    data: Sequence[Any] | None = None,
    store: Any = None,
    settings: Settings | None = None,
    features: Iterable[tuple[int, int]] | None = None,
    max_tokens: int | None = None,
    batch_size: int = 16,
    skip_first: int | None = None,
) -> Collected:
    """One pass over ``data`` or ``store``: the :class:`Collector` of every (or each chosen) feature.

    Args:
        model: the model (it runs the texts; its tokenizer names the tokens).
        dictionary: any :class:`~interp.dictionary.SparseDictionary` (an SAE set, a per-layer transcoder set,
            a cross-layer transcoder), or an :class:`~interp.sae.SAE`.
        data: texts, or records with ``text``; each item its own sequence.
        store: an :class:`~interp.store.ActivationStore` (or its folder) of the dictionary's input hooks.
        settings: what to keep per feature.
        features: ``(layer, feature)`` pairs; default: every feature.
        max_tokens: read only the first this many tokens.
        batch_size: items per forward pass (texts).
        skip_first: leading positions of each item not counted (default: 1 after a special token).
    """
    reading, source = _open(model, dictionary, features, data, store, batch_size, max_tokens, skip_first)
    collector = reading.collector(settings or Settings())
    run_pass(collector, reading.dictionary, source.batches({}))
    return Collected(collector, source.texts, reading.dictionary)


def _open(
    model: Any,
    dictionary: Any,
    features: Iterable[tuple[int, int]] | None,
    data: Sequence[Any] | None,
    store: Any,
    batch_size: int,
    max_tokens: int | None,
    skip_first: int | None,
) -> tuple[Reading, CorpusSource | StoreSource]:
    """What a pass reads of ``dictionary``, and where its tokens come from."""
    reading = Reading.of(dictionary, features, model)
    source = make_source(
        model,
        reading,
        data=data,
        store=store,
        batch_size=batch_size,
        max_tokens=max_tokens,
        skip_first=skip_first,
    )
    return reading, source


@dataclass(frozen=True)
class Written:
    """What :func:`write_dashboards` did: the folder, counts, and this run's seconds per stage."""

    folder: Path
    scan: str
    n_features: int
    n_tokens: int
    state: str
    seconds: Mapping[str, float]


def write_dashboards(
    model: Any,
    dictionary: Any,
    out: str | Path,
    *,
    data: Sequence[Any] | None = None,
    store: Any = None,
    scan: str = "dictionary",
    settings: Settings | None = None,
    features: Iterable[tuple[int, int]] | None = None,
    max_tokens: int | None = None,
    batch_size: int = 16,
    skip_first: int | None = None,
    checkpoint_seconds: float = 300.0,
    page: bool = True,
    progress: bool = False,
    after_batch: Callable[[Batch], None] | None = None,
) -> Written:
    """Dashboards of every (or each chosen) feature in ``OUT/features/SCAN`` (see :mod:`.folder`).

    Arguments as for :func:`collect`, and:
        out: the folder (a graph's folder, to link the two).
        scan: the dictionary's name there, and in circuit-tracer's ``transcoder_id``.
        checkpoint_seconds: how often the pass is saved, so that a rerun continues.
        page: write the standalone dashboard page.
        progress: show a progress bar.
        after_batch: called after each batch (after any checkpoint it triggered).

    Returns:
        :class:`Written`; ``state`` is ``"new"``, ``"resume"`` or ``"complete"`` (nothing was left to do).
    """
    from interp.store.meta import model_fingerprint

    settings = settings or Settings()
    reading, source = _open(model, dictionary, features, data, store, batch_size, max_tokens, skip_first)
    view = reading.dictionary
    if isinstance(source, StoreSource):
        check_store(source.store, reading.hooks.values(), model)
    identity = {
        "format": FORMAT,
        "scan": scan,
        "model": {"name": getattr(model.cfg, "name", None), "fingerprint": model_fingerprint(model)},
        "dictionary": {"kind": kind(view), "layers": reading.layers,
                       "widths": [reading.widths[layer] for layer in reading.layers],
                       "fingerprint": fingerprint(view)},
        "data": source.identity(),
        "settings": asdict(settings),
        "features": {str(k): v.tolist() for k, v in reading.chosen.items()} or "all",
        "max_tokens": max_tokens,
        "skip_first": source.skip_first,
    }  # fmt: skip
    folder = DashboardFolder(out, scan)
    state = folder.claim(identity)
    if state == "complete":
        return Written(folder.root, scan, 0, 0, state, {})
    collector = reading.collector(settings)
    progress_at: dict[str, Any] = {}
    if state == "resume":
        tensors, extra = folder.load_state()
        collector.load({k: v.to(collector.count.device) for k, v in tensors.items()})
        source.texts.load(extra["tokens"])
        progress_at = extra["progress"]
    seconds = {"pass": 0.0, "checkpoints": 0.0, "records": 0.0}
    if not progress_at.get("done"):
        checkpoints = _Checkpoints(folder, collector, source, progress_at, checkpoint_seconds, after_batch)
        clock = time.perf_counter()
        checkpoints.bar = _bar(progress, source, max_tokens, progress_at)
        try:
            with _interrupt_between_batches() as stop:
                run_pass(
                    collector,
                    view,
                    source.batches(progress_at),
                    after_batch=lambda b: checkpoints.after(b, stop),
                )
        finally:
            if checkpoints.bar is not None:
                checkpoints.bar.close()
        seconds["pass"] = time.perf_counter() - clock
        progress_at["done"] = True
        checkpoints.save()
        seconds["checkpoints"] = checkpoints.seconds
    clock = time.perf_counter()
    index = write_records(collector, model, view, source.texts, folder, identity)
    html = None
    if page:
        from interp.sae.dashboards.page import render_page

        html = render_page(folder.root, index)
    folder.finish(index, html)
    seconds["records"] = time.perf_counter() - clock
    return Written(folder.root, scan, collector.n, collector.n_tokens, state, seconds)


def write_records(
    collector: Collector,
    model: Any,
    view: SparseDictionary,
    texts: Any,
    folder: DashboardFolder,
    identity: dict,
) -> dict[str, Any]:
    """Write every feature's file, ``CHUNK`` at a time; the index (not yet written) of what was written."""
    from interp.sae.dashboards.records import feature_records

    rows = []
    for start in range(0, collector.n, CHUNK):
        for record in feature_records(
            collector, model, view, texts, folder.scan, start, min(start + CHUNK, collector.n)
        ):
            folder.write_feature(record)
            rows.append(
                {
                    "layer": record["layer"],
                    "feature": record["feature"],
                    "featureIndex": record["index"],
                    "density": record["activation_frequency"],
                    "act_max": record["act_max"],
                }
            )
    return {
        "format": FORMAT,
        "scan": folder.scan,
        "dictionary": identity["dictionary"]["kind"],
        "n_tokens": collector.n_tokens,
        "settings": identity["settings"],
        "features": rows,
    }


class _Checkpoints:
    """Saves the pass every ``every`` seconds and when Ctrl-C asks it to stop, always between batches."""

    def __init__(
        self,
        folder: DashboardFolder,
        collector: Collector,
        source: Any,
        progress: dict[str, Any],
        every: float,
        after_batch: Callable[[Batch], None] | None,
    ) -> None:
        self.folder, self.collector, self.source, self.progress = folder, collector, source, progress
        self.every, self.after_batch = every, after_batch
        self.last, self.seconds, self.bar = time.monotonic(), 0.0, None

    def save(self) -> None:
        tick = time.perf_counter()
        extra = {"progress": self.progress, "tokens": self.source.texts.state()}
        self.folder.save_state(self.collector.state(), extra)
        self.seconds += time.perf_counter() - tick
        self.last = time.monotonic()

    def after(self, batch: Batch, stop: Callable[[], bool]) -> None:
        self.progress.update(batch.progress)
        if self.bar is not None:
            self.bar.update(batch.n_read)
        if stop():  # Ctrl-C arrived during this batch: save it whole, then stop
            self.save()
            raise KeyboardInterrupt
        if time.monotonic() - self.last >= self.every:
            self.save()
        if self.after_batch is not None:
            self.after_batch(batch)


@contextlib.contextmanager
def _interrupt_between_batches() -> Iterator[Callable[[], bool]]:
    """Hold Ctrl-C (SIGINT) until the batch under way ends, so the pass can be saved whole: yields a function
    that says whether one arrived. A second Ctrl-C stops at once. Off the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    arrived = []

    def hold(signum: int, frame: Any) -> None:
        if arrived:
            raise KeyboardInterrupt
        arrived.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield lambda: bool(arrived)
    finally:
        signal.signal(signal.SIGINT, previous)


def _bar(show: bool, source: Any, max_tokens: int | None, at: dict) -> Any:
    if not show:
        return None
    from tqdm.auto import tqdm

    total = len(source.store) if isinstance(source, StoreSource) else None
    if max_tokens is not None:
        total = max_tokens if total is None else min(total, max_tokens)
    return tqdm(total=total, initial=at.get("tokens", 0), unit="tok", desc="dashboards")
