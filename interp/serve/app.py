"""The ASGI application of ``interp serve``: one FastAPI app over one :class:`~interp.serve.state.Served`.

Routers by API: Neuronpedia's inference API under ``/v1`` (:mod:`.neuronpedia`), Neuronpedia's graph-server API
at the root (:mod:`.graph_server`), the named folders' files (:mod:`.files`); pages and their JSON routes join
as one more router (``build_app(served, routers=[...])``). In front of all of them the :class:`~.guard.Guard`
checks the secret and the body's size, and every error is answered in one shape (:mod:`.errors`). Closing the
app stops the model's worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from interp.serve import errors, files, graph_server
from interp.serve.guard import Guard
from interp.serve.neuronpedia import activations, steering, utilities
from interp.serve.state import Served

NEURONPEDIA_PREFIX = "/v1"


def build_app(served: Served, routers: Sequence[APIRouter] = ()) -> FastAPI:
    """The app serving ``served``: every API, plus ``routers`` (a workbench's pages and their JSON)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        served.engine.close()

    app = FastAPI(
        title=f"interp serve: {served.model_id}",
        description="Neuronpedia's inference and graph-server APIs over a model interp loads.",
        lifespan=lifespan,
    )
    app.state.served = served
    for router in (activations.router, steering.router, utilities.router):
        app.include_router(router, prefix=NEURONPEDIA_PREFIX)
    app.include_router(graph_server.router)
    app.include_router(files.router)
    for router in routers:
        app.include_router(router)
    errors.install(app)
    app.add_middleware(Guard, secret=served.secret, max_body_bytes=served.limits.max_body_bytes)
    return app
