"""A browser's way past the secret: a login form once, then a cookie on every request of the pages.

Programs send the secret in the ``x-secret-key`` header (Neuronpedia's clients do), but a browser cannot add a
header to the page it navigates to. So a browser asking for a page without the secret (its ``Accept`` names
``text/html``) gets, with the same 401 every request without it gets, a form that asks for it; the form posts
it to ``/login``, which answers a right secret with the page first asked for and a cookie, and a wrong one with
401 and the form again. The cookie holds a keyed hash of the secret (never the secret itself): ``HttpOnly``, so
no script reads it, and ``SameSite=Strict``, so no other site's page can send it, by a link, a form or a
script, to this server. The pages' own requests to the JSON routes carry it as any same-origin request does.
"""

from __future__ import annotations

import hashlib
import hmac
from html import escape
from urllib.parse import parse_qs

from interp.report.assets import CONTENT_SECURITY_POLICY, read_asset
from interp.report.shell import render_shell

COOKIE = "interp_serve"
LOGIN_PATH = "/login"
POLICY = CONTENT_SECURITY_POLICY.replace("form-action 'none'", "form-action 'self'")
"""The login page: no script, a form that may post to this server only."""


def token(secret: bytes) -> str:
    """The cookie's value for ``secret``: HMAC-SHA256 of a fixed message, keyed by the secret."""
    return hmac.new(secret, b"interp serve session", hashlib.sha256).hexdigest()


def cookie_header(secret: bytes) -> str:
    """The ``Set-Cookie`` value that lets a browser in."""
    return f"{COOKIE}={token(secret)}; Path=/; HttpOnly; SameSite=Strict"


def has_cookie(headers: dict[bytes, bytes], secret: bytes) -> bool:
    """Whether the request's cookies hold this secret's token (compared in constant time)."""
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and hmac.compare_digest(value.encode("latin-1"), token(secret).encode()):
            return True
    return False


def wants_page(headers: dict[bytes, bytes]) -> bool:
    """Whether the request is a browser's navigation (it accepts HTML), which gets the form, not JSON."""
    return b"text/html" in headers.get(b"accept", b"")


def login_form(body: bytes) -> tuple[str, str]:
    """``(secret, next)`` of a posted form; ``next`` is a path of this server only (else ``/``)."""
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    secret = fields.get("secret", [""])[0]
    after = fields.get("next", ["/"])[0]
    return secret, local_path(after)


def local_path(path: str) -> str:
    """``path`` if it is a path on this server (``/...``, not ``//host`` nor with a backslash), else ``/``."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path or any(c < " " for c in path):
        return "/"
    return path


def login_page(after: str, wrong: bool) -> str:
    """The form asking for the secret, posting to ``/login`` and then going to ``after``."""
    note = (
        '<p class="error">That is not this server\'s secret.</p>'
        if wrong
        else "<p>This server asks for its secret (<code>--secret</code> or <code>INTERP_SERVE_SECRET</code>).</p>"
    )
    body = (
        "<main><h1>interp serve</h1>"
        f"{note}"
        f'<form method="post" action="{LOGIN_PATH}">'
        '<label>secret <input type="password" name="secret" id="secret" autofocus></label> '
        f'<input type="hidden" name="next" value="{escape(local_path(after))}">'
        '<button type="submit" id="login">open</button></form></main>'
    )
    return render_shell(
        title="interp serve: secret",
        body=body,
        css=[read_asset("workbench.css", "interp.serve.pages.assets")],
        policy=POLICY,
    )
