"""Tracing a new graph from the pages, with its progress as it goes, and its viewer once it is done.

``POST /api/trace`` takes ``/generate-graph``'s request, checked the same way
(:func:`~interp.serve.graph_server.check_graph_request`), and answers with server-sent events while it works:
``{"state": "queued", "ahead": n}``, then ``{"state": "tracing", "done": rows, "total": rows}`` after each of
attribution's backward passes (its progress report, :func:`~interp.circuits.features.attribute`), ``{"state":
"drawing"}``, and ``{"state": "done", "url": ...}``: the new graph's live viewer, kept in memory
(:class:`~interp.serve.pages.state.Workbench`), with its features' dashboards where a scan of the served
transcoders is in the named folders. A failure is ``{"state": "failed", "error": ...}``; a client that goes
away stops the work at the next backward pass. ``GET /live/traced/ID/`` is the viewer; beside it, its graph
file (``SLUG.json``) and its dashboards (``features/SCAN/...``), so the page reads them as it reads a folder's.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from interp.circuits.features.viewer import render_viewer, viewer_data
from interp.sae.dashboards.link import scan_path
from interp.serve.errors import RequestError
from interp.serve.graph_server import GraphGenerationRequest, check_graph_request, graph_document, trace_graph
from interp.serve.pages.graphs import live_block
from interp.serve.pages.page import HEADERS, asset, respond
from interp.serve.pages.state import TracedGraph, workbench
from interp.serve.queue import Cancel, Cancelled

router = APIRouter()
log = logging.getLogger("interp.serve")


@router.post("/api/trace")
async def trace(body: GraphGenerationRequest, request: Request) -> StreamingResponse:
    served = request.app.state.served
    check_graph_request(served, body)
    bench = workbench(request)
    scan = (await bench.current_labels()).scan_of_set(bench.identities.transcoders)
    engine = served.engine
    engine.check_room()  # refused now, with a status, rather than in a stream already begun

    def run(cancel: Cancel, emit: Any) -> None:
        def progress(done: int, total: int) -> None:
            cancel.check()
            emit({"state": "tracing", "done": done, "total": total})

        graph = trace_graph(served, body, progress)
        emit({"state": "drawing"})
        doc = graph_document(served, body, graph, scan=None if scan is None else scan_path(scan.real.name))
        data = viewer_data(
            graph,
            doc,
            node_threshold=body.node_threshold,
            edge_threshold=body.edge_threshold,
            model=served.model,
            transcoders=served.transcoders,
            dashboards=None if scan is None else scan.real,
        )
        live = live_block(served, graph.input_tokens.tolist(), "")
        page = render_viewer(data, live=live, live_scripts=[asset("api.js"), asset("trace.js")])
        emit(TracedGraph(page, doc, None if scan is None else (scan.folder, scan.path, scan.real.name)))

    async def frames() -> Any:
        yield _event({"state": "queued", "ahead": engine.waiting + engine.running})
        try:
            async for item in engine.stream(run, Cancel()):
                if isinstance(item, TracedGraph):
                    found = bench.keep(item)
                    yield _event(
                        {"state": "done", "url": f"/live/traced/{found}/", "slug": body.slug_identifier}
                    )
                else:
                    yield _event(item)
        except Cancelled:
            return
        except RequestError as err:
            yield _event({"state": "failed", "error": err.message})
        except (ValueError, KeyError) as err:
            yield _event({"state": "failed", "error": str(err.args[0] if isinstance(err, KeyError) else err)})
        except Exception as err:  # a bug: said to the page, the traceback in the log
            log.exception("tracing a graph failed")
            yield _event({"state": "failed", "error": f"internal error ({type(err).__name__}: {err})"})

    return StreamingResponse(frames(), media_type="text/event-stream", headers=HEADERS)


@router.get("/live/traced/{found}/{path:path}")
async def traced(found: str, path: str, request: Request) -> object:
    graph = workbench(request).traced(found)
    if path == "":
        return respond(graph.page)
    if path == f"{graph.doc['metadata']['slug']}.json":
        return JSONResponse(graph.doc, headers=HEADERS)
    if graph.dashboards is not None:
        folder, scan, name = graph.dashboards
        prefix = f"features/{name}/"
        if path.startswith(prefix):
            from interp.serve import files

            return await files.file(folder, f"{scan}/{path[len(prefix) :]}", request)
    raise RequestError(404, f"traced graph {found} has no file {path!r}")


def _event(value: dict[str, Any]) -> str:
    return f"data: {json.dumps(value)}\n\n"
