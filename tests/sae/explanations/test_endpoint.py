"""The HTTP backend against real servers on loopback.

The main tests run ``transformers serve`` on the packaged SmolLM2 (:mod:`tests.sae.explanations.server`) and
send it real requests: the pre-flight, several requests in flight, the cache, and ``interp autointerp`` end to
end. Small HTTP servers written here (standard library, on loopback) stand for the ways an endpoint goes
wrong that a healthy server cannot show: one that answers 404 to everything (not an OpenAI endpoint), one that
fails with 503 before it answers (retried with backoff), one too slow for the timeout.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from interp.cli import main
from interp.sae.explanations import (
    CachedBackend,
    ChatFailure,
    ChatReply,
    ChatRequest,
    EndpointBackend,
    ResponseCache,
)
from tests.sae.explanations.planted import PLANTED, write_folder
from tests.sae.explanations.server import free_port, hf_folder, serve

pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    log = tmp_path_factory.mktemp("server") / "serve.log"
    with serve(hf_folder(), log) as url:
        yield url


def requests(n: int, max_tokens: int = 6) -> list[ChatRequest]:
    return [ChatRequest((("user", f"Name a colour, number {i}."),), max_tokens=max_tokens) for i in range(n)]


@pytest.mark.slow
def test_requests_in_flight_and_the_cache(server, tmp_path):
    endpoint = EndpointBackend(server, concurrency=4)
    assert endpoint.check() == str(hf_folder())  # the one model the server lists
    endpoint.timeline.clear()
    backend = CachedBackend(endpoint, ResponseCache(tmp_path / "cache.jsonl"))
    answers = backend.complete(requests(10))
    assert all(isinstance(a, ChatReply) and a.text for a in answers), answers
    assert endpoint.max_in_flight() == 4 and len(endpoint.timeline) == 10 and backend.asked == 10
    again = CachedBackend(endpoint, ResponseCache(tmp_path / "cache.jsonl"))  # a new run, the same file
    assert again.complete(requests(10)) == answers and again.asked == 0


@pytest.mark.slow
def test_autointerp_over_http_end_to_end(server, tmp_path, capsys):
    """Explain and score two planted features through the server, label a graph, rerun: nothing is asked."""
    write_folder(tmp_path, features=PLANTED[:2], n_examples=24)
    graph = {
        "metadata": {"slug": "g", "scan": "planted"},
        "nodes": [
            {
                "node_id": "0_5_1",
                "feature": PLANTED[0].id.index,
                "layer": "0",
                "feature_type": "cross layer transcoder",
                "clerp": "",
            },
            {"node_id": "E_7_1", "feature": 1, "layer": "E", "feature_type": "embedding", "clerp": ""},
        ],
        "links": [],
    }
    (tmp_path / "g.json").write_text(json.dumps(graph))
    command = ["autointerp", str(tmp_path), "--explainer", server, "--scorer", "detection,fuzzing", "--n-explain",
               "3", "--n-test", "2", "--per-prompt", "2", "--concurrency", "4", "--quiet"]  # fmt: skip
    assert main(command) == 0
    printed = capsys.readouterr().out
    rows = [json.loads(line) for line in (tmp_path / "explanations.jsonl").read_text().splitlines()]
    assert [r["feature"] for r in rows] == ["0:5", "1:2"]
    for row in rows:
        assert row["explainer"]["model"] == str(hf_folder()) and len(row["explainer"]["prompt"]) == 64
        if row.get(
            "error"
        ):  # a 135M scorer often answers with no readable list: said in the row, in one line
            assert "\n" not in row["error"]
        for name in ("detection", "fuzzing"):
            score = row["scores"][name]
            assert (
                score["chance"] == 0.5 and len(score["prompts"]) == 2 and score["model"] == str(hf_folder())
            )
            assert score["auc"] is None  # transformers serve returns no log probabilities
    labelled = json.loads((tmp_path / "g.json").read_text())["nodes"]
    assert labelled[0]["clerp"] == rows[0].get("explanation", "") and labelled[1]["clerp"] == ""
    assert "requests sent" in printed
    assert main(command) == 0  # a rerun: every answer is in the cache
    assert capsys.readouterr().out.rstrip().endswith("0 requests sent to " + str(hf_folder()))


def test_nothing_listening_is_refused_in_one_line():
    port = free_port()
    with pytest.raises(
        ValueError,
        match=rf"--explainer http://127.0.0.1:{port}/v1: nothing answers there .*; start the server",
    ):
        EndpointBackend(f"http://127.0.0.1:{port}", timeout=2, max_retries=0).check()


class _Scripted(BaseHTTPRequestHandler):
    """Answers by ``self.server.script``: a list of (status, delay) for successive chat requests."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.server.openai and self.path == "/v1/models":
            self._send(
                200,
                {
                    "object": "list",
                    "data": [{"id": "scripted", "object": "model", "created": 0, "owned_by": "test"}],
                },
            )
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.seen += 1
        if self.server.reject_logprobs and body.get("logprobs"):
            self._send(400, {"error": {"message": "logprobs are not supported"}})
            return
        status, delay = self.server.script.pop(0) if self.server.script else (200, 0.0)
        time.sleep(delay)
        if status != 200 or not self.server.openai:
            self._send(status if self.server.openai else 404, {"error": {"message": "busy"}})
            return
        self._send(200, {
            "id": "1", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "[1]"}}],
        })  # fmt: skip

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def scripted() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    server.openai, server.script, server.seen, server.reject_logprobs = True, [], 0, False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_not_an_openai_endpoint_is_refused_in_one_line(scripted):
    scripted.openai = False
    with pytest.raises(ValueError, match=r"GET /models answered 404; not an OpenAI-compatible endpoint"):
        EndpointBackend(_url(scripted), timeout=5, max_retries=0).check()


def test_failures_are_retried_with_backoff_then_reported(scripted):
    backend = EndpointBackend(_url(scripted), model="scripted", timeout=5, max_retries=2)
    scripted.script = [(503, 0.0), (503, 0.0)]
    start = time.monotonic()
    assert backend.complete(requests(1)) == [ChatReply("[1]", "scripted")]
    assert scripted.seen == 3 and time.monotonic() - start > 0.5  # two waits of 0.5 s and 1 s, less jitter
    scripted.script, scripted.seen = [(503, 0.0)] * 3, 0
    (failure,) = backend.complete(requests(1))
    assert isinstance(failure, ChatFailure) and scripted.seen == 3 and "InternalServerError" in failure.reason
    assert "\n" not in failure.reason


def test_a_slow_answer_times_out(scripted):
    backend = EndpointBackend(_url(scripted), model="scripted", timeout=0.5, max_retries=0)
    scripted.script = [(200, 2.0)]
    (failure,) = backend.complete(requests(1))
    assert isinstance(failure, ChatFailure) and "Timeout" in failure.reason


def test_the_model_must_be_served(scripted):
    with pytest.raises(
        ValueError, match=r"--explainer-model 'other' is not served at .*; it serves scripted"
    ):
        EndpointBackend(_url(scripted), model="other", timeout=5).check()
    assert EndpointBackend(_url(scripted), timeout=5).check() == "scripted"


def test_a_server_that_refuses_logprobs_is_asked_without(scripted):
    scripted.reject_logprobs = True
    backend = EndpointBackend(_url(scripted), timeout=5, max_retries=0)
    backend.check()
    assert backend.logprobs is False
    request = ChatRequest((("user", "x"),), max_tokens=3, top_logprobs=5)
    assert backend.complete([request]) == [ChatReply("[1]", "scripted")]  # no tokens, so no AUC


def test_cli_refuses_a_folder_without_features_before_asking(tmp_path, capsys, scripted):
    assert main(["autointerp", str(tmp_path), "--explainer", _url(scripted)]) == 2
    err = capsys.readouterr().err
    # the test server's thread may log a connection an earlier test dropped; the command's own output is one line
    ours = err[err.index("interp: error: ") :]
    assert "holds no feature files" in ours and ours.count("\n") == 1
    assert scripted.seen == 0
