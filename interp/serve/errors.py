"""Every refusal is one JSON object, ``{"error": "..."}``, with a 4xx status and one line saying what was wrong
(the value) and what would be right, as Neuronpedia's servers answer; nothing a request sends crashes the server.

- :class:`RequestError`: a route's own refusal (its status: 400 a bad value or one over a stated limit, 401 no
  secret, 404 an unknown model or source, 413 a body over the size limit, 422 a field interp does not honour).
- A body that is not JSON, or fields of the wrong type: 422, naming the field.
- The library's own refusal of a value (``ValueError``, ``KeyError``: an unknown hook, a prompt longer than the
  context...): 400 with its message, which already names the value.
- :class:`~interp.serve.queue.QueueFull`: 503; :class:`~interp.serve.queue.Cancelled`: 503 (the request went
  away or the server is stopping; a client that left never reads it).
- Anything else is a bug: 500, one line naming the exception, and the traceback in the server's log.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from interp.serve.queue import Cancelled, QueueFull

log = logging.getLogger("interp.serve")


class RequestError(Exception):
    """A request refused with ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one shape of every refusal."""
    return JSONResponse({"error": _one_line(message)}, status_code=status, headers=headers)


def at_most(name: str, value: int, limit: int, flag: str | None = None) -> None:
    """Refuse ``value`` above the server's ``limit`` (400), naming both and the flag that sets it."""
    if value > limit:
        where = f" ({flag})" if flag else ""
        raise RequestError(400, f"{name}={value} is more than this server's limit of {limit}{where}")


def install(app: FastAPI) -> None:
    """Answer every error in the one shape."""
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(QueueFull, lambda request, err: error_response(503, str(err)))
    app.add_exception_handler(Cancelled, lambda request, err: error_response(503, f"stopped: {err}"))
    app.add_exception_handler(ValueError, _value_error)
    app.add_exception_handler(KeyError, _value_error)
    app.add_exception_handler(Exception, _bug)


async def _request_error(request: Request, err: RequestError) -> JSONResponse:
    return error_response(err.status, err.message)


async def _http_error(request: Request, err: HTTPException) -> JSONResponse:
    detail = err.detail if isinstance(err.detail, str) else str(err.detail)
    if err.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path} on this server"
    elif err.status_code == 405:
        detail = f"{request.url.path} does not take {request.method}"
    return error_response(err.status_code, detail, getattr(err, "headers", None))


async def _validation_error(request: Request, err: RequestValidationError) -> JSONResponse:
    problems = [_problem(e) for e in err.errors()]
    return error_response(
        422, "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    )


def _problem(error: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "the body"
    kind = error.get("type", "")
    if kind == "json_invalid":
        return f"the body is not valid JSON ({error.get('ctx', {}).get('error', 'cannot be parsed')})"
    if kind == "missing":
        return f"{where} is missing"
    if kind == "extra_forbidden":
        return f"{where} is not a field of this request; remove it"
    given = error.get("input")
    shown = "" if isinstance(given, dict | list) or given is None else f" (got {given!r})"
    return f"{where}: {error.get('msg', 'invalid')}{shown}"


async def _value_error(request: Request, err: Exception) -> JSONResponse:
    message = (
        err.args[0] if isinstance(err, KeyError) and err.args and isinstance(err.args[0], str) else str(err)
    )
    return error_response(400, message)


async def _bug(request: Request, err: Exception) -> JSONResponse:
    log.exception("%s %s failed", request.method, request.url.path)
    return error_response(
        500, f"internal error ({type(err).__name__}: {err}); the server's log has the traceback"
    )


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", str(text).strip())
