"""``write_dashboards``: the pass, resumable, then every feature's file, the page and the index.

The run, in order: what is read (:class:`~.reading.Reading`, :class:`~.data.Data`), the folder claimed by the
run's identity (:mod:`.identity`, :mod:`interp.resumable`), the pass with its checkpoints and Ctrl-C
(:mod:`.stream`, :mod:`.checkpoints`), then the files (:func:`write_files`), each phase with its heading and
bar (:mod:`.progress`). A run that stops continues from its last checkpoint with the same batches and, the sample
being a function of the tokens alone, ends with the files an uninterrupted run writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp.dictionary import SparseDictionary
from interp.feature_id import FeatureId
from interp.sae.dashboards.checkpoints import Checkpoints, interrupt_between_batches
from interp.sae.dashboards.collector import Collector, Settings
from interp.sae.dashboards.data import Data
from interp.sae.dashboards.folder import FORMAT, DashboardFolder
from interp.sae.dashboards.identity import run_identity
from interp.sae.dashboards.progress import Progress
from interp.sae.dashboards.reading import Reading
from interp.sae.dashboards.sources import Batch, CorpusSource
from interp.sae.dashboards.stream import files_of, run_pass


@dataclass(frozen=True)
class Written:
    """What :func:`write_dashboards` did: the folder, counts, and this run's seconds per stage.

    Attributes:
        n_dead: features that never fired in the tokens read (their files hold no example: nothing to explain).
    """

    folder: Path
    scan: str
    n_features: int
    n_tokens: int
    state: str
    seconds: Mapping[str, float]
    n_dead: int = 0


def write_dashboards(
    model: Any,
    dictionary: Any,
    out: str | Path,
    data: Any,
    *,
    scan: str = "dictionary",
    settings: Settings | None = None,
    features: Iterable[FeatureId | tuple[int, int]] | None = None,
    checkpoint_seconds: float = 300.0,
    progress: bool = False,
    after_batch: Callable[[Batch], None] | None = None,
) -> Written:
    """Dashboards of every (or each chosen) feature in ``OUT/features/SCAN`` (see :mod:`.folder`).

    Args:
        model: the model (it runs the texts; its tokenizer names the tokens).
        dictionary: any :class:`~interp.dictionary.SparseDictionary`, or an :class:`~interp.sae.SAE`.
        out: the folder (a graph's folder, to link the two).
        data: the tokens read: :class:`~interp.sae.dashboards.data.Data`, or texts (or records, or ``(ids,
            mask)`` batches), or an activation store (see :meth:`Data.of`).
        scan: the dictionary's name there, and in circuit-tracer's ``transcoder_id``.
        settings: what to keep per feature.
        features: features (:class:`~interp.feature_id.FeatureId` or ``(layer, feature)``); default: all.
        checkpoint_seconds: how often the pass is saved, so that a rerun continues.
        progress: say what each phase does, with a bar of its real total, on stderr.
        after_batch: called after each batch (after any checkpoint it triggered).

    Returns:
        :class:`Written`; ``state`` is ``"new"``, ``"resume"`` or ``"complete"`` (nothing was left to do).
    """
    settings = settings or Settings()
    data = Data.of(data)
    show = Progress(progress)
    reading = Reading.of(dictionary, features, model)
    source = data.open(model, reading)
    folder = DashboardFolder(out, scan)
    if isinstance(source, CorpusSource):
        bar = show.phase(
            f"tokenizing {len(source.items):,} items to fingerprint them and count their tokens",
            total=source.n_batches(), unit="batch", label="tokenize",
        )  # fmt: skip
        source.read_through(lambda: bar.update())
        bar.close()
    identity = run_identity(model, reading, source, scan=scan, settings=settings, max_tokens=data.max_tokens)
    state = folder.claim(identity)
    if state == "complete":
        return Written(folder.root, scan, 0, 0, state, {})
    collector = reading.collector(settings)
    at: dict[str, Any] = {}
    if state == "resume":
        tensors, extra = folder.load_state()
        collector.load({k: v.to(collector.count.device) for k, v in tensors.items()})
        source.texts.load(extra["tokens"])
        at = extra["progress"]
    seconds = {"pass": 0.0, "checkpoints": 0.0, "records": 0.0}
    if not at.get("done"):
        seconds["pass"], seconds["checkpoints"] = _pass(
            show, folder, collector, reading, source, at, checkpoint_seconds, after_batch
        )
    clock = time.perf_counter()
    index = write_files(collector, model, reading.dictionary, source.texts, folder, identity, show)
    from interp.sae.dashboards.page import render_page

    folder.finish(index, render_page(folder.root, index))
    seconds["records"] = time.perf_counter() - clock
    dead = sum(1 for row in index["features"] if row["density"] == 0)
    return Written(folder.root, scan, collector.n, collector.n_tokens, state, seconds, dead)


def _pass(
    show: Progress,
    folder: DashboardFolder,
    collector: Collector,
    reading: Reading,
    source: Any,
    at: dict[str, Any],
    every: float,
    after_batch: Callable[[Batch], None] | None,
) -> tuple[float, float]:
    """The pass from ``at`` on, saved every ``every`` seconds, at its end, and on Ctrl-C; its seconds and those
    spent saving."""
    total = source.total_tokens()
    done = at.get("tokens", 0)
    resumed = f", continuing after {done:,}" if done else ""
    bar = show.phase(
        f"reading {total:,} tokens through {collector.n:,} features at layers {_layers(reading.layers)}{resumed}",
        total=total, unit="tok", label="pass", initial=done,
    )  # fmt: skip

    def on_batch(batch: Batch) -> None:
        bar.update(batch.n_read)
        if after_batch is not None:
            after_batch(batch)

    checkpoints = Checkpoints(folder, collector, source, at, every, on_batch)
    clock = time.perf_counter()
    try:
        with interrupt_between_batches() as stop:
            run_pass(
                collector,
                reading.dictionary,
                source.batches(at),
                after_batch=lambda b: checkpoints.after(b, stop),
            )
    finally:
        bar.close()
    seconds = time.perf_counter() - clock
    at["done"] = True
    checkpoints.save()
    return seconds, checkpoints.seconds


def write_files(
    collector: Collector,
    model: Any,
    view: SparseDictionary,
    texts: Any,
    folder: DashboardFolder,
    identity: dict,
    show: Progress | None = None,
) -> dict[str, Any]:
    """Write every feature's file, a chunk of features at a time; the index (not yet written) of what was
    written."""
    show = show or Progress(False)
    bar = show.phase(
        f"writing {collector.n:,} feature files to {folder.root}",
        total=collector.n,
        unit="feature",
        label="files",
    )
    rows = []
    try:
        for chunk in files_of(collector, model, view, texts, folder.scan):
            for file in chunk:
                folder.write_feature(file)
                rows.append(
                    {
                        "layer": file.layer,
                        "feature": file.feature,
                        "featureIndex": file.index,
                        "density": file.activation_frequency,
                        "act_max": file.act_max,
                    }
                )
            bar.update(len(chunk))
    finally:
        bar.close()
    return {
        "format": FORMAT,
        "scan": folder.scan,
        "dictionary": identity["dictionary"]["kind"],
        "n_tokens": collector.n_tokens,
        "settings": identity["settings"],
        "features": rows,
    }


def _layers(layers: list[int]) -> str:
    """``0-29`` for a run of layers, else the list."""
    if len(layers) > 2 and layers == list(range(layers[0], layers[-1] + 1)):
        return f"{layers[0]}-{layers[-1]}"
    return ", ".join(map(str, layers))
