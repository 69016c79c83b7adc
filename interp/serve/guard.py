"""What every request passes before a route sees it: the secret, and the size of its body.

Binding to loopback (127.0.0.1, the default) keeps other machines out; any other address needs a secret, and
whenever a secret is set, on any address, a request without it in the ``x-secret-key`` header (Neuronpedia's
clients send it there) gets 401, compared in constant time. A body larger than the limit gets 413 before it is
read whole: at once when its ``Content-Length`` says so, or as soon as the bytes received pass the limit (the
body is read here, before any route, and handed on whole).
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

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
        if self.secret is not None and not hmac.compare_digest(headers.get(SECRET_HEADER, b""), self.secret):
            given = "a wrong" if SECRET_HEADER in headers else "no"
            await error_response(
                401,
                f"this server needs its secret in the x-secret-key header; the request has {given} x-secret-key",
            )(scope, receive, send)
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
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()  # what follows the body: the client's going away

        await self.app(scope, replay, send)
