"""One computation at a time on the loaded model: requests wait in a queue, a worker thread runs them in order.

A model in memory serves one forward or backward pass at a time well; two at once only split the cores and
double the memory of activations. So every route hands its computation to the :class:`Engine`, whose single
worker thread runs one job after another while the event loop goes on accepting, validating and answering
other requests. A job carries a :class:`Cancel`: the route sets it when its client disconnects (or the server
shuts down), a job still waiting is then dropped, and a running one stops at its next check, which the
computations make between generated tokens (a hook on the embedding) and between attribution's backward passes
(its progress report). The queue has a length limit: past it a request is refused at once, naming the limit,
rather than left waiting without end.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import torch


class Cancelled(Exception):
    """A job stopped because its request went away or the server is shutting down."""


class QueueFull(Exception):
    """More requests are waiting than the limit allows."""


class Cancel:
    """Set by the route (client gone, server stopping); checked by the computation between its steps."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def set(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self, *_: Any) -> None:
        """Raise :class:`Cancelled` if set (callable as a hook or a progress report: arguments ignored)."""
        if self._event.is_set():
            raise Cancelled(self.reason)


@dataclass(eq=False)
class _Job:
    fn: Callable[[Cancel], Any]
    cancel: Cancel
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    started: threading.Event = field(default_factory=threading.Event)

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        def put() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)

        self.loop.call_soon_threadsafe(put)


class Engine:
    """The worker thread that runs jobs one at a time, and the queue in front of it.

    Args:
        max_waiting: jobs that may wait for the worker at once; one more is refused with :class:`QueueFull`.
        threads: torch's intra-op threads on the worker (default: those of the thread creating the engine;
            a new thread would otherwise start with OpenMP's default, every core).
    """

    def __init__(self, max_waiting: int, threads: int | None = None) -> None:
        self.max_waiting = max_waiting
        self.threads = torch.get_num_threads() if threads is None else threads
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._jobs: set[_Job] = set()
        self._lock = threading.Lock()
        self.completed = 0
        self.cancelled = 0
        self._thread = threading.Thread(target=self._work, name="interp-serve-model", daemon=True)
        self._thread.start()

    @property
    def running(self) -> int:
        """Jobs started and not finished (0 or 1)."""
        with self._lock:
            return sum(job.started.is_set() for job in self._jobs)

    @property
    def waiting(self) -> int:
        """Jobs queued and not yet started."""
        with self._lock:
            return sum(not job.started.is_set() for job in self._jobs)

    async def run(self, fn: Callable[[Cancel], Any], cancel: Cancel) -> Any:
        """Run ``fn(cancel)`` on the worker when its turn comes; its result, or its exception, is this call's.

        Raises:
            QueueFull: ``max_waiting`` jobs are already waiting. Cancelled: ``cancel`` was set before or while
            the job ran.
        """
        loop = asyncio.get_running_loop()
        job = _Job(fn, cancel, loop, loop.create_future())
        with self._lock:
            self._check_room()
            self._jobs.add(job)
        self._queue.put(job)
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            cancel.set("the request was cancelled")
            raise

    async def stream(
        self, fn: Callable[[Cancel, Callable[[Any], None]], Any], cancel: Cancel
    ) -> AsyncIterator[Any]:
        """Run ``fn(cancel, emit)`` on the worker and yield what it emits, as it emits it; closing the iterator
        early (the client went away) cancels the job."""
        loop = asyncio.get_running_loop()
        items: asyncio.Queue = asyncio.Queue()
        done = object()

        def emit(item: Any) -> None:
            loop.call_soon_threadsafe(items.put_nowait, item)

        async def runner() -> None:
            try:
                await self.run(lambda c: fn(c, emit), cancel)
            finally:
                loop.call_soon_threadsafe(items.put_nowait, done)

        task = asyncio.ensure_future(runner())
        try:
            while True:
                item = await items.get()
                if item is done:
                    break
                yield item
            await task  # raises what the job raised
        finally:
            if not task.done():
                cancel.set("the client went away")
                await asyncio.wait([task])

    def check_room(self) -> None:
        """Raise :class:`QueueFull` if a job submitted now would be refused."""
        with self._lock:
            self._check_room()

    def _check_room(self) -> None:
        if sum(not j.started.is_set() for j in self._jobs) >= self.max_waiting:
            raise QueueFull(
                f"{self.max_waiting} requests are already waiting for the model, this server's limit "
                "(--max-waiting); try again shortly"
            )

    def cancel_all(self, reason: str) -> None:
        """Cancel every job, waiting or running (the server is stopping)."""
        with self._lock:
            for job in self._jobs:
                job.cancel.set(reason)

    def close(self) -> None:
        """Cancel what is left, stop the worker and wait for it."""
        self.cancel_all("the server is shutting down")
        self._queue.put(None)
        self._thread.join()

    def _work(self) -> None:
        torch.set_num_threads(self.threads)
        while True:
            job = self._queue.get()
            if job is None:
                return
            job.started.set()
            try:
                job.cancel.check()
                result = job.fn(job.cancel)
            except Cancelled as err:
                self.cancelled += 1
                job.settle(error=err)
            except BaseException as err:  # the route turns it into an answer; the worker goes on
                job.settle(error=err)
            else:
                self.completed += 1
                job.settle(result)
            finally:
                with self._lock:
                    self._jobs.discard(job)
