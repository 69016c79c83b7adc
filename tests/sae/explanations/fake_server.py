"""Small OpenAI-compatible servers on loopback that go wrong in the ways a real one can, for the endpoint's tests.

:class:`FakeServer` lists one model (``scripted``; or answers 404 to everything, as an address that is not an
OpenAI endpoint) and answers each chat request by the next step of its ``script``, then by ``default``:

- ``"ok"``: a chat completion whose text the rule model (:mod:`tests.sae.explanations.rule_model`) writes for the
  request, so that a whole ``interp autointerp`` run reads sensible answers;
- ``"garbage"``: status 200 and a body that is not JSON (cut off mid-object), as a proxy or a crashing server
  sends; ``"shape"``: JSON of another shape; ``"html"``: an HTML error page with status 200;
- ``"hang"``: no answer until the server is closed (a server that lists models but whose model never answers);
- ``("slow", seconds)``: the answer after a delay; ``("status", code)``: an error status (retried by the client).

A script of good answers followed by ``"garbage"`` is the late garbage of a server that breaks mid-run. The
pre-flight's one-token requests (``Say OK.``) are always answered, unless ``hang_preflight`` is set, and do not
use the script. ``answered`` keeps the last user turn of each request answered with a chat completion, in the
order the answers were sent; ``received`` those of every chat request.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from interp.sae.explanations.chat import ChatRequest
from tests.sae.explanations.rule_model import RuleModel

MODEL = "scripted"
GARBAGE = (
    '{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted", "choices": [{"index": 0, '
    '"finish_reason": "stop", "message": {"role": "assis'
)
"""A chat completion cut off mid-object (longer than the part a failure quotes)."""


class FakeServer(ThreadingHTTPServer):
    """A scripted chat server (see the module's description); ``url`` is its API root."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.openai = True
        self.script: list[Any] = []
        self.default: Any = "ok"
        self.hang_preflight = False
        self.reject_logprobs = False
        self.answered: list[str] = []
        self.received: list[str] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.brain = RuleModel(probabilities=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    @property
    def seen(self) -> int:
        return len(self.received)

    def next_step(self, last_turn: str) -> Any:
        with self.lock:
            self.received.append(last_turn)
            return self.script.pop(0) if self.script else self.default


@contextlib.contextmanager
def fake_server() -> Iterator[FakeServer]:
    """A :class:`FakeServer` serving on a thread of its own until the block ends; hanging answers are released."""
    server = FakeServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.server.openai and self.path == "/v1/models":
            model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "test"}
            self._send(200, json.dumps({"object": "list", "data": [model]}))
        else:
            self._send(404, json.dumps({"detail": "Not Found"}))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self.server.openai:
            self._send(404, json.dumps({"detail": "Not Found"}))
            return
        if self.server.reject_logprobs and body.get("logprobs"):
            self._send(400, json.dumps({"error": {"message": "logprobs are not supported"}}))
            return
        messages = tuple((m["role"], m["content"]) for m in body.get("messages", ()))
        last = messages[-1][1] if messages else ""
        if last == "Say OK.":
            if self.server.hang_preflight:
                self.server.closing.wait()
                return
            self._complete(body, "OK", last, record=False)
            return
        step = self.server.next_step(last)
        kind, value = step if isinstance(step, tuple) else (step, None)
        if kind == "hang":
            self.server.closing.wait()
        elif kind == "slow":
            if not self.server.closing.wait(value):
                self._complete(body, self._text(messages, body), last)
        elif kind == "status":
            self._send(value, json.dumps({"error": {"message": "busy"}}))
        elif kind == "garbage":
            self._send(200, GARBAGE)
        elif kind == "shape":
            self._send(200, json.dumps({"result": "[1]"}))
        elif kind == "html":
            self._send(200, "<html><body>502 Bad Gateway</body></html>", "text/html")
        else:
            self._complete(body, self._text(messages, body), last)

    def _text(self, messages: tuple, body: dict) -> str:
        """The rule model's answer to the package's own prompts (a system turn first); ``[1]`` to anything else."""
        if not messages or messages[0][0] != "system":
            return "[1]"
        request = ChatRequest(messages, max_tokens=int(body.get("max_tokens") or 16))
        return self.server.brain.complete([request])[0].text

    def _complete(self, body: dict, text: str, last: str, record: bool = True) -> None:
        answer = {
            "id": "1", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        }  # fmt: skip
        self._send(200, json.dumps(answer))
        if record:
            with self.server.lock:
                self.server.answered.append(last)

    def _send(self, status: int, body: str, kind: str = "application/json") -> None:
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up on this request (its timeout): nobody to answer
