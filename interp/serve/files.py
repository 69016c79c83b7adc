"""The routes that serve the named folders (:mod:`interp.serve.folders`): ``GET /files/NAME/PATH`` a file read-only
(a folder: its ``index.html``, else what it holds), and ``GET /api/folders`` what every folder holds."""

from __future__ import annotations

import os

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

router = APIRouter()


@router.get("/api/folders")
async def folders(request: Request) -> dict:
    return request.app.state.served.folders.catalogue()


@router.get("/files/{name}")
async def folder(name: str, request: Request) -> object:
    return await file(name, "", request)


@router.get("/files/{name}/{path:path}")
async def file(name: str, path: str, request: Request) -> object:
    found = request.app.state.served.folders.resolve(name, path)
    if found.is_dir():
        page = found / "index.html"
        if page.is_file():
            return FileResponse(page)
        entries = sorted(os.scandir(found), key=lambda e: e.name)
        return {
            "folder": f"{name}/{path}".rstrip("/"),
            "entries": [e.name + ("/" if e.is_dir() else "") for e in entries],
        }
    return FileResponse(found)
