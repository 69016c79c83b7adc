"""The home page, ``GET /``: what the named folders hold, each opening from the server, and the way into the
other pages.

Graphs (a folder's viewer opens live, :mod:`~interp.serve.pages.graphs`; every graph file opens as it is),
dashboard scans (their pages; those of a served dictionary say which source set they show), reports, other
pages such as ``interp explain``'s, and explanation files. The listing is the server's
(:meth:`~interp.serve.folders.Folders.catalogue`), embedded in the page, so the page costs one request.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from interp.sae.dashboards.folder import RUN
from interp.serve.folders import read_json
from interp.serve.pages.page import asset, render, respond
from interp.serve.pages.state import Workbench, workbench

router = APIRouter()


def home_page(served: Any, bench: Workbench) -> str:
    """The page: the catalogue, each scan with the source set whose dictionary made it (``null``: one not
    served)."""
    catalogue = served.folders.catalogue()
    for listing in catalogue["folders"]:
        root = served.folders.roots[listing["name"]]
        for scan in listing["scans"]:
            scan["set"] = bench.identities.set_of(read_json(root / scan["folder"] / RUN))
    return render(served, "home", "Workbench", catalogue, scripts=[asset("trace.js")])


@router.get("/")
async def home(request: Request) -> object:
    served, bench = request.app.state.served, workbench(request)
    return respond(await run_in_threadpool(home_page, served, bench))  # reads files: off the event loop
