"""A route's computation handed to the model's queue, stopped when its client goes away.

:func:`compute` queues ``fn(cancel)`` on the server's :class:`~interp.serve.queue.Engine` and, while the
request waits or runs, watches its connection: a client that disconnects sets the cancel, so a waiting job is
dropped and a running one stops at its next check. :func:`stopping_hooks` is that check for a forward pass: a
hook on the token embedding, which every forward pass (each generated token) runs first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request

from interp.serve.queue import Cancel

T = TypeVar("T")
POLL_SECONDS = 0.05


async def compute(request: Request, fn: Callable[[Cancel], T]) -> T:
    """``fn(cancel)`` run on the model's worker when its turn comes (see the module docstring)."""
    cancel = Cancel()
    watcher = asyncio.ensure_future(_watch(request, cancel))
    try:
        return await request.app.state.served.engine.run(fn, cancel)
    finally:
        watcher.cancel()


async def _watch(request: Request, cancel: Cancel) -> None:
    while not cancel.is_set():
        if await request.is_disconnected():
            cancel.set("the client went away")
            return
        await asyncio.sleep(POLL_SECONDS)


def stopping_hooks(cancel: Cancel) -> list[tuple[str, Callable[..., Any]]]:
    """Forward hooks that stop a generation or a forward pass at its next pass once ``cancel`` is set."""
    return [("hook_embed", cancel.check)]
