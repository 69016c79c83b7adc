"""What every request passes before a route sees it: the secret, and the size of its body.

Binding to loopback (127.0.0.1, the default) keeps other machines out; any other address needs a secret, and
whenever a secret is set, on any address, a request without it in the ``x-secret-key`` header (Neuronpedia's
clients send it there) gets 401, compared in constant time. A browser proves it once, in a form, and then
with a cookie (:mod:`~interp.serve.session`): a page asked for without the secret is answered 401 with that
form, ``POST /login`` with a right secret sets the cookie, and every request with the cookie passes. A body
larger than the limit gets 413 before it is read whole: at once when its ``Content-Length`` says so, or as soon
as the bytes received pass the limit (the body is read here, before any route, and handed on whole).

Two more refusals keep other web sites out of a server on loopback, which a browser on this machine can
reach: without a secret, a request must be addressed to a loopback name (its ``Host`` header: ``127.0.0.1``,
``localhost``, ``[::1]``), so a site whose name is made to resolve to 127.0.0.1 (DNS rebinding) cannot read
the model or the folders; and a request a browser sends from another origin (its ``Origin`` header names
another host than ``Host``) gets 403, so another site's page cannot set the model to work. Programs, which
send no ``Origin``, are not concerned.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

from starlette.responses import HTMLResponse, RedirectResponse

from interp.serve import session
from interp.serve.errors import RequestError, error_response

SECRET_HEADER = b"x-secret-key"
SECRET_ENVIRONMENT = "INTERP_SERVE_SECRET"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, secret: str | None) -> None:
    """Refuse to listen beyond this machine without a secret."""
    if secret is not None and not secret:
        raise ValueError("--secret is empty; give a secret of at least one character, or leave it out")
    if not is_loopback(host) and secret is None:
        raise ValueError(
            f"--host {host} lets other machines reach the model; give a secret with --secret S or the "
            f"{SECRET_ENVIRONMENT} environment variable (clients send it as x-secret-key), or listen on "
            "127.0.0.1"
        )


def host_name(host: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8000`` is ``::1``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class BodyTooLarge(RequestError):
    """A request body over ``--max-body-bytes``."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413, f"the request body is larger than this server's limit of {limit} bytes (--max-body-bytes)"
        )


class Guard:
    """ASGI middleware: the secret first, then the body's size (see the module docstring)."""

    def __init__(self, app: Any, *, secret: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.secret = None if secret is None else secret.encode()
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        refused = self._foreign(headers)
        if refused is not None:
            await error_response(403, refused)(scope, receive, send)
            return
        login = scope["path"] == session.LOGIN_PATH and scope["method"] == "POST"
        if self.secret is not None and not login and not self._admitted(headers):
            await self._refuse(scope, headers)(scope, receive, send)
            return
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_body_bytes:
            await error_response(413, BodyTooLarge(self.max_body_bytes).message)(scope, receive, send)
            return
        body = bytearray()
        while True:  # the whole body, before any route reads it: refused as soon as it passes the limit
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away while sending
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await error_response(413, BodyTooLarge(self.max_body_bytes).message)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        if login:
            await self._login(bytes(body))(scope, receive, send)
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # what follows the body: the client's going away

        await self.app(scope, replay, send)

    def _foreign(self, headers: dict[bytes, bytes]) -> str | None:
        """Why a request comes from another site (see the module docstring), or ``None``."""
        host = headers.get(b"host", b"").decode("latin-1")
        if self.secret is None and host and not is_loopback(host_name(host)):
            return (
                f"the request is addressed to {host!r}; without a secret this server answers requests addressed "
                "to 127.0.0.1, localhost or [::1] only (give it a secret to serve other names)"
            )
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1").partition("://")[2] != host:
            return (
                f"the request comes from a page of {origin.decode('latin-1')!r}, another site than this server "
                f"({host!r}); only this server's own pages may call it from a browser"
            )
        return None

    def _admitted(self, headers: dict[bytes, bytes]) -> bool:
        """The secret in the header, or a browser's cookie made from it."""
        assert self.secret is not None
        given = headers.get(SECRET_HEADER)
        if given is not None:
            return hmac.compare_digest(given, self.secret)
        return session.has_cookie(headers, self.secret)

    def _refuse(self, scope: dict, headers: dict[bytes, bytes]) -> Any:
        """401: the login form for a browser's navigation, one line of JSON for anything else."""
        if SECRET_HEADER not in headers and scope["method"] == "GET" and session.wants_page(headers):
            query = scope.get("query_string", b"").decode("latin-1")
            after = scope["path"] + (f"?{query}" if query else "")
            return HTMLResponse(session.login_page(after, wrong=False), status_code=401)
        given = "a wrong" if SECRET_HEADER in headers else "no"
        return error_response(
            401,
            f"this server needs its secret in the x-secret-key header; the request has {given} x-secret-key",
        )

    def _login(self, body: bytes) -> Any:
        """``POST /login``: a right secret goes on to the page asked for, with the cookie; a wrong one gets 401
        and the form again."""
        secret, after = session.login_form(body)
        if self.secret is None:
            return RedirectResponse(after, status_code=303)
        if not hmac.compare_digest(secret.encode(), self.secret):
            return HTMLResponse(session.login_page(after, wrong=True), status_code=401)
        response = RedirectResponse(after, status_code=303)
        response.headers["set-cookie"] = session.cookie_header(self.secret)
        return response
