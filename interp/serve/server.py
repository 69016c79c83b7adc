"""Running the app: in the foreground until Ctrl-C (:func:`serve`, what ``interp serve`` does), or in a
background thread for as long as a ``with`` block lasts (:func:`serving`: tests, benchmarks, notebooks).

Ctrl-C stops the server cleanly: the jobs waiting or running on the model are cancelled at once (a running
graph stops after its current backward pass, a generation after its current token), their requests are
answered, the connections close, the worker thread ends and the port is free. Nothing is written to disk, so
nothing is left behind. A second Ctrl-C exits without waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import uvicorn

from interp.serve.app import build_app
from interp.serve.state import Served

GRACE_SECONDS = 5  # how long connections get to close once the jobs are cancelled


class _Server(uvicorn.Server):
    """uvicorn's server, which cancels the model's jobs as soon as it is told to stop."""

    def __init__(self, config: uvicorn.Config, served: Served) -> None:
        super().__init__(config)
        self.served = served

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.served.engine.cancel_all("the server is shutting down")
        super().handle_exit(sig, frame)


def _config(served: Served, host: str, port: int, routers: Sequence[Any], log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        build_app(served, routers),
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=GRACE_SECONDS,
        lifespan="on",
    )


def serve(
    served: Served,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    routers: Sequence[Any] = (),
    log_level: str = "info",
) -> None:
    """Serve until interrupted (see the module docstring)."""
    _Server(_config(served, host, port, routers, log_level), served).run()


@contextmanager
def serving(
    served: Served,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    routers: Sequence[Any] = (),
    log_level: str = "warning",
) -> Iterator[str]:
    """Serve in a background thread for the ``with`` block; yields the base URL (``port=0``: a free port).

    Example:
        >>> with serving(served) as url:  # doctest: +SKIP
        ...     requests.post(f"{url}/v1/tokenize", json={"model": served.model_id, "text": "Hi"})
    """
    server = _Server(_config(served, host, port, routers, log_level), served)
    thread = threading.Thread(target=server.run, name="interp-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        served.engine.cancel_all("the server is shutting down")
        server.should_exit = True
        thread.join()
