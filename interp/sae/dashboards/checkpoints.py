"""Saving a pass while it runs, so that a rerun continues it: every ``every`` seconds, when it ends, and when
Ctrl-C arrives, always between batches.

Ctrl-C (SIGINT) is held until the batch under way is folded in, then the pass is saved whole and stops; a
second Ctrl-C stops at once. The sample being a function of the tokens alone, a run continued from any
checkpoint ends with the files an uninterrupted run writes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from interp.sae.dashboards.collector import Collector
from interp.sae.dashboards.folder import DashboardFolder
from interp.sae.dashboards.sources import Batch


class Checkpoints:
    """Saves the pass every ``every`` seconds and when Ctrl-C asks it to stop, always between batches.

    Attributes:
        progress: the source's progress after the last batch (``{"batch": ..., "tokens": ...}``), saved with
            the tables.
        seconds: time spent saving.
    """

    def __init__(
        self,
        folder: DashboardFolder,
        collector: Collector,
        source: Any,
        progress: dict[str, Any],
        every: float,
        on_batch: Callable[[Batch], None] | None = None,
    ) -> None:
        self.folder, self.collector, self.source, self.progress = folder, collector, source, progress
        self.every, self.on_batch = every, on_batch
        self.last, self.seconds = time.monotonic(), 0.0

    def save(self) -> None:
        tick = time.perf_counter()
        extra = {"progress": self.progress, "tokens": self.source.texts.state()}
        self.folder.save_state(self.collector.state(), extra)
        self.seconds += time.perf_counter() - tick
        self.last = time.monotonic()

    def after(self, batch: Batch, stop: Callable[[], bool]) -> None:
        """After each batch: record its progress, save if Ctrl-C arrived (then stop) or it is time, then call
        ``on_batch``."""
        self.progress.update(batch.progress)
        if stop():  # Ctrl-C arrived during this batch: save it whole, then stop
            self.save()
            raise KeyboardInterrupt
        if time.monotonic() - self.last >= self.every:
            self.save()
        if self.on_batch is not None:
            self.on_batch(batch)


@contextlib.contextmanager
def interrupt_between_batches() -> Iterator[Callable[[], bool]]:
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
