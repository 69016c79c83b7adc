"""The HTTP backend against real servers on loopback.

The main tests run ``transformers serve`` on the packaged SmolLM2 (:mod:`tests.sae.explanations.server`) and
send it real requests: the pre-flight, several requests in flight, the cache, and ``interp autointerp`` end to
end. Small HTTP servers written here (standard library, on loopback) stand for the ways an endpoint goes
wrong that a healthy server cannot show (:mod:`tests.sae.explanations.fake_server`): one that answers 404 to
everything (not an OpenAI endpoint), one that fails with 503 before it answers (retried with backoff, each retry
said), one too slow for the timeout, one whose answers are not JSON (from the start, or after good ones), one that
lists a model but never answers a chat request, and one slow enough to stop a run mid-way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interp.cli import main
from interp.sae.explanations import (
    CachedBackend,
    ChatReply,
    ChatRequest,
    EndpointBackend,
    Failure,
    ResponseCache,
    read_rows,
)
from interp.sae.explanations import endpoint as endpoint_module
from tests.sae.explanations.fake_server import GARBAGE, FakeServer, fake_server
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
            # with no answer the metrics can be computed from, none is reported and the row says why
            if "error" in score:
                assert not {"accuracy", "f1", "auc"} & set(score)
                assert f"{name}: {score['error']}" in row["error"]
            else:
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


@pytest.fixture
def scripted() -> Iterator[FakeServer]:
    with fake_server() as server:
        yield server


def _url(server: FakeServer) -> str:
    return server.url


def test_not_an_openai_endpoint_is_refused_in_one_line(scripted):
    scripted.openai = False
    with pytest.raises(ValueError, match=r"GET /models answered 404; not an OpenAI-compatible endpoint"):
        EndpointBackend(_url(scripted), timeout=5, max_retries=0).check()


def test_failures_are_retried_with_backoff_and_each_retry_is_said(scripted):
    said = []
    backend = EndpointBackend(scripted.url, model="scripted", timeout=5, max_retries=2, say=said.append)
    scripted.script = [("status", 503), ("status", 503)]
    start = time.monotonic()
    assert backend.complete(requests(1)) == [ChatReply("[1]", "scripted")]
    assert scripted.seen == 3 and time.monotonic() - start > 1.1  # waits of 0.5 s and 1 s, less a quarter
    assert [line[: line.rindex(" in ")] for line in said] == [
        f"{scripted.url}: answered 503; retry 1 of 2",
        f"{scripted.url}: answered 503; retry 2 of 2",
    ]
    waits = [float(line.split(" in ")[-1].removesuffix(" s")) for line in said]
    assert 0.375 <= waits[0] <= 0.5 and 0.75 <= waits[1] <= 1.0
    said.clear()
    scripted.script, scripted.received = [("status", 503)] * 3, []
    (failure,) = backend.complete(requests(1))
    assert isinstance(failure, Failure) and scripted.seen == 3 and len(said) == 2
    assert failure.reason.startswith(f"{scripted.url}: InternalServerError: ")
    assert failure.reason.endswith("(after 2 retries)") and "\n" not in failure.reason


def test_a_timeout_is_retried_and_said(scripted):
    said = []
    backend = EndpointBackend(scripted.url, model="scripted", timeout=0.5, max_retries=1, say=said.append)
    scripted.script = [("slow", 3.0)]
    assert backend.complete(requests(1)) == [ChatReply("[1]", "scripted")]
    assert len(said) == 1 and said[0].startswith(
        f"{scripted.url}: no answer within 0.5 s (--timeout); retry 1 of 1 in "
    )


def test_a_slow_answer_times_out(scripted):
    backend = EndpointBackend(_url(scripted), model="scripted", timeout=0.5, max_retries=0)
    scripted.script = [("slow", 2.0)]
    (failure,) = backend.complete(requests(1))
    assert isinstance(failure, Failure) and "Timeout" in failure.reason


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


def test_answers_that_are_not_chat_completions_fail_their_request_alone(scripted):
    """A body that is not JSON, JSON of another shape, an HTML page: each is its request's failure, naming the URL
    and quoting what came back; the requests around them are answered, and each answer is handed over as it
    arrives."""
    backend = EndpointBackend(scripted.url, model="scripted", timeout=5, max_retries=3, concurrency=1)
    scripted.script = ["ok", "garbage", "shape", "html", "ok"]
    arrived = []
    answers = backend.complete(requests(5), on_reply=lambda i, a: arrived.append(i))
    assert answers[0] == answers[4] == ChatReply("[1]", "scripted") and arrived == [0, 1, 2, 3, 4]
    garbage, shape, html = answers[1:4]
    assert isinstance(garbage, Failure) and garbage.reason.startswith(
        f"{scripted.url}: the chat answer (200) is not a chat completion (JSONDecodeError: "
    )
    assert garbage.reason.endswith(f"it began {GARBAGE[:120]!r}...")
    assert isinstance(shape, Failure) and shape.reason == (
        f"{scripted.url}: the chat answer holds no text: " + repr('{"result": "[1]"}')
    )
    assert isinstance(html, Failure) and scripted.url in html.reason and "502 Bad Gateway" in html.reason
    assert scripted.seen == 5  # not retried: the server answered, with something that is not an answer


def _autointerp(folder, url, *more):
    return ["autointerp", str(folder), "--explainer", url, "--scorer", "detection", "--n-explain", "6",
            "--n-test", "4", "--per-prompt", "2", "--concurrency", "1", *more]  # fmt: skip


def test_late_garbage_costs_one_feature_and_keeps_every_answer(scripted, tmp_path, capsys):
    """Two good explanations, then a body that is not JSON: the third feature's row records the failure with the
    URL and what came back, the run goes on to score the others, and every answer received is in the cache."""
    root = write_folder(tmp_path / "dash", n_examples=24)
    scripted.script = ["ok", "ok", "garbage"]
    assert main(_autointerp(root, scripted.url, "--quiet")) == 0
    err = capsys.readouterr().err.splitlines()
    rows = read_rows(root / "explanations.jsonl")
    good, broken = [rows[p.id.index] for p in PLANTED[:2]], rows[PLANTED[2].id.index]
    assert [r["explanation"] for r in good] == [p.explanation for p in PLANTED[:2]]
    assert all(r["scores"]["detection"]["accuracy"] == 1.0 and "error" not in r for r in good)
    assert broken["error"].startswith(
        f"the explainer's request failed: {scripted.url}: the chat answer (200) is not a chat completion "
        "(JSONDecodeError: "
    )
    assert broken["error"].endswith(f"it began {GARBAGE[:120]!r}...") and "explanation" not in broken
    assert err == [f"interp: feature {PLANTED[2].id}: {broken['error']}"]
    cache = ResponseCache(root / "explanations-cache.jsonl")
    assert len(cache) == len(scripted.answered) == 2 + 2 * 4  # two explanations, four prompts for each
    scripted.received.clear()
    assert main(_autointerp(root, scripted.url, "--quiet")) == 0  # the rerun asks only for the broken feature
    assert (
        len(scripted.received) == 1 + 4
        and "error" not in read_rows(root / "explanations.jsonl")[PLANTED[2].id.index]
    )


def test_a_server_that_lists_models_but_never_answers_is_refused_within_the_preflight_limit(
    scripted, tmp_path, capsys, monkeypatch
):
    """The pre-flight waits its own short limit, once, whatever --timeout and --retries say, and says what it is
    waiting for; then one line."""
    monkeypatch.setattr(endpoint_module, "PREFLIGHT_TIMEOUT", 1.5)
    root = write_folder(tmp_path / "dash", features=PLANTED[:1], n_examples=12)
    scripted.hang_preflight = True
    done = {}

    def command() -> None:
        done["rc"] = main(_autointerp(root, scripted.url, "--timeout", "120", "--retries", "4"))

    start = time.monotonic()
    thread = threading.Thread(target=command, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive() and done["rc"] == 2 and time.monotonic() - start < 10
    err = capsys.readouterr().err
    ours = err[err.index("interp: waiting") :].splitlines()
    assert ours == [
        f"interp: waiting for {scripted.url} to answer a one-token chat request to scripted (at most 1.5 s)",
        f"interp: error: --explainer {scripted.url} lists scripted but gave no answer to a one-token chat request "
        "within 1.5 s (the pre-flight's limit: the smaller of --timeout and 1.5 s); the model may still be loading: "
        "wait for it and run again",
    ]
    assert not (root / "explanations.jsonl").exists() and scripted.seen == 0


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--timeout", "nan"], "argument --timeout: nan; give a finite number above 0"),
        (["--timeout", "0"], "argument --timeout: 0; give a finite number above 0"),
        (["--timeout", "soon"], "argument --timeout: 'soon' is not a number; give a finite number above 0"),
        (["--retries", "-1"], "argument --retries: -1 is negative; give 0 or more"),
        (
            ["--scorer", "detection,bogus"],
            "argument --scorer: invalid value 'detection,bogus': 'bogus' is not a scorer; choose from detection, "
            "fuzzing, embedding (comma separated)",
        ),
    ],
)
def test_bad_endpoint_flags_are_one_line_naming_flag_and_value(scripted, tmp_path, capsys, flags, message):
    root = write_folder(tmp_path / "dash", features=PLANTED[:1], n_examples=12)
    assert main(_autointerp(root, scripted.url, *flags)) == 2
    err = capsys.readouterr().err
    ours = err[err.index("interp") :]
    assert ours == f"interp autointerp: error: {message}; see 'interp autointerp --help'\n"
    assert scripted.seen == 0


def test_an_interrupted_run_keeps_each_answer_and_a_rerun_asks_nothing_twice(scripted, tmp_path):
    """Ctrl-C while the server is slow to answer the third explanation: the two answers received are in the
    cache, and the rerun asks for everything else but never for them."""
    root = write_folder(tmp_path / "dash", n_examples=24)
    scripted.script, scripted.default = ["ok", "ok"], "hang"
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "interp", *_autointerp(root, scripted.url, "--quiet")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while len(scripted.answered) < 2 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(scripted.answered) == 2, process.communicate(timeout=60)
        time.sleep(1.0)  # the third request hangs: nothing more can arrive
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130 and err.rstrip().endswith("interp: interrupted"), err
    first = list(scripted.answered)
    assert len(ResponseCache(root / "explanations-cache.jsonl")) == 2
    scripted.received.clear()
    scripted.default = "ok"
    assert main(_autointerp(root, scripted.url, "--quiet")) == 0
    assert not set(first) & set(scripted.received)  # nothing answered before is asked again
    assert len(scripted.received) == 1 + 3 * 4  # the third explanation, and every feature's detection prompts
    rows = read_rows(root / "explanations.jsonl")
    assert [rows[p.id.index]["explanation"] for p in PLANTED] == [p.explanation for p in PLANTED]
