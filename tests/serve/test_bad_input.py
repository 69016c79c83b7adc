"""The bad-input list of ``docs/workbench.md``: each bad request gets one clear 4xx naming what was wrong, a
client that goes away stops its work, and nothing crashes the server (a good request after all of them is
answered). A tiny model (the golden Llama checkpoint of ``tests/circuits``) with an SAE and transcoders, and
small limits, so that every limit can be reached; one server for the module, with its secret."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import neuronpedia_inference_client as npc
import pytest
from neuronpedia_inference_client.exceptions import ApiException

from interp.serve import Limits, Served, Sources, serving
from interp.serve.folders import Folders
from tests.circuits.test_golden import golden_case
from tests.serve.helpers import client, post, random_sae, raw

SECRET = "s3cret"
AUTH = {"x-secret-key": SECRET}
LIMITS = Limits(
    max_body_bytes=20_000,
    max_prompt_tokens=20,
    max_new_tokens=55,
    max_prompts=2,
    max_results=50,
    max_similar=8,
    max_waiting=1,
)
PROMPT = "w5 w9 w12"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    model, tc, _, _ = golden_case("llama-per-layer")
    sae = random_sae(model.cfg.d_model, "blocks.0.hook_resid_post", 32, 1)
    from interp.sae import SAESet

    root = tmp_path_factory.mktemp("files")
    (root / "graphs").mkdir()
    (root / "graphs" / "index.html").write_text("<p>graphs</p>")
    (root / "secret.txt").write_text("not served")
    (root / "graphs" / "out").symlink_to(root / "secret.txt")
    (root / "graphs" / "loop").symlink_to(root / "graphs" / "loop")
    sources = Sources([("res", SAESet(sae)), ("tc", tc)])
    served = Served(
        model,
        "tiny",
        sources,
        transcoders=tc,
        folders=Folders([root / "graphs"]),
        limits=LIMITS,
        secret=SECRET,
    )
    with serving(served) as url:
        yield served, url


def _call(url: str, path: str, payload: dict, headers: dict | None = None) -> tuple[int, dict]:
    return post(url, path, payload, {**AUTH, **(headers or {})})


SINGLE = {"prompt": PROMPT, "model": "tiny", "source": "0-res", "index": "3"}
ALL = {
    "prompt": PROMPT,
    "model": "tiny",
    "source_set": "res",
    "selected_sources": [],
    "sort_by_token_indexes": [],
    "ignore_bos": True,
    "num_results": 5,
}
STEER = {
    "prompt": PROMPT,
    "model": "tiny",
    "steer_method": "SIMPLE_ADDITIVE",
    "normalize_steering": False,
    "types": ["STEERED"],
    "features": [{"model": "tiny", "source": "1-tc", "index": 2, "strength": 4.0}],
    "n_completion_tokens": 3,
    "temperature": 0,
    "strength_multiplier": 1,
    "freq_penalty": 0,
    "seed": 1,
}

# (what, route, request, status, words the error must hold)
BAD = [
    (
        "wrong source name",
        "/v1/activation/single",
        {**SINGLE, "source": "0-ress"},
        404,
        "no source '0-ress' on this server; it has '0-res'",
    ),
    ("wrong source set", "/v1/activation/all", {**ALL, "source_set": "att"}, 404, "no source set 'att'"),
    (
        "source outside its set",
        "/v1/activation/all",
        {**ALL, "selected_sources": ["0-tc"]},
        404,
        "is not in source set 'res'",
    ),
    (
        "unknown feature index",
        "/v1/activation/single",
        {**SINGLE, "index": "32"},
        400,
        "feature 32 is out of range for 0-res, which has 32 (0 to 31)",
    ),
    (
        "index not a number",
        "/v1/activation/single",
        {**SINGLE, "index": "three"},
        400,
        "index 'three' is not a whole number",
    ),
    (
        "feature and vector both",
        "/v1/activation/single",
        {**SINGLE, "vector": [1.0], "hook": "hook_embed"},
        400,
        "exactly one pair",
    ),
    (
        "unknown hook",
        "/v1/activation/single",
        {"prompt": PROMPT, "model": "tiny", "vector": [1.0] * 32, "hook": "blocks.0.hook_resid_pots"},
        400,
        "did you mean 'blocks.0.hook_resid_post'",
    ),
    (
        "vector of the wrong width",
        "/v1/activation/single",
        {"prompt": PROMPT, "model": "tiny", "vector": [1.0] * 5, "hook": "blocks.0.hook_resid_post"},
        400,
        "the vector has 5 values; blocks.0.hook_resid_post has width 32",
    ),
    (
        "wrong model",
        "/v1/activation/single",
        {**SINGLE, "model": "gpt2"},
        404,
        "model 'gpt2' is not served here; this server serves 'tiny'",
    ),
    (
        "negative num_results",
        "/v1/activation/all",
        {**ALL, "num_results": -1},
        400,
        "num_results=-1; give the number of features",
    ),
    (
        "huge num_results",
        "/v1/activation/all",
        {**ALL, "num_results": 10**6},
        400,
        "num_results=1000000 is more than this server's limit of 50 (--max-results)",
    ),
    (
        "sort index outside the prompt",
        "/v1/activation/all",
        {**ALL, "sort_by_token_indexes": [9]},
        400,
        "sort_by_token_indexes [9] are outside the prompt of 4 tokens",
    ),
    (
        "zero top_k",
        "/v1/activation/topk-by-token",
        {"prompt": PROMPT, "model": "tiny", "source": "0-res", "top_k": 0, "ignore_bos": True},
        400,
        "top_k=0; give the number of features per token",
    ),
    (
        "huge top_k",
        "/v1/activation/topk-by-token",
        {"prompt": PROMPT, "model": "tiny", "source": "0-res", "top_k": 10**9, "ignore_bos": True},
        400,
        "(--max-top-k)",
    ),
    (
        "too many prompts",
        "/v1/activation/source",
        {"prompts": [PROMPT] * 3, "model": "tiny", "source": "0-res"},
        400,
        "the number of prompts=3 is more than this server's limit of 2 (--max-prompts)",
    ),
    (
        "no prompts",
        "/v1/activation/source",
        {"prompts": [], "model": "tiny", "source": "0-res"},
        400,
        "prompts is empty",
    ),
    (
        "prompt too long",
        "/v1/activation/single",
        {**SINGLE, "prompt": " ".join(["w5"] * 30)},
        400,
        "the prompt is 31 tokens; this server takes at most 20 (--max-prompt-tokens)",
    ),
    ("empty prompt", "/v1/activation/single", {**SINGLE, "prompt": ""}, 400, "the prompt is empty"),
    (
        "zero new tokens",
        "/v1/steer/completion",
        {**STEER, "n_completion_tokens": 0},
        422,
        "n_completion_tokens: Input should be greater than or equal to 1",
    ),
    (
        "huge new tokens",
        "/v1/steer/completion",
        {**STEER, "n_completion_tokens": 10**6},
        400,
        "n_completion_tokens=1000000 is more than this server's limit of 55 (--max-new-tokens)",
    ),
    (
        "past the context",
        "/v1/steer/completion",
        {**STEER, "n_completion_tokens": 55, "prompt": " ".join(["w5"] * 15)},
        400,
        "pass the model's context of 64",
    ),
    (
        "penalty while greedy",
        "/v1/steer/completion",
        {**STEER, "freq_penalty": 1.0},
        400,
        "freq_penalty=1.0 applies only when sampling",
    ),
    (
        "no steering",
        "/v1/steer/completion",
        {**STEER, "features": None},
        400,
        "give features or vectors to steer with: exactly one",
    ),
    (
        "a type twice",
        "/v1/steer/completion",
        {**STEER, "types": ["STEERED", "STEERED"]},
        400,
        "names a type twice",
    ),
    (
        "a feature's own vector",
        "/v1/steer/completion",
        {**STEER, "features": [{**STEER["features"][0], "steering_vector": [0.0] * 32}]},
        422,
        "a feature's steering_vector is its decoder row",
    ),
    (
        "persona monitoring",
        "/v1/steer/completion-chat",
        {
            **STEER,
            "prompt": [{"role": "user", "content": "w5"}],
            "is_assistant_axis": True,
            "steer_special_tokens": True,
        },
        422,
        "is_assistant_axis asks for Neuronpedia's persona monitoring",
    ),
    (
        "chat without a template",
        "/v1/steer/completion-chat",
        {**STEER, "prompt": [{"role": "user", "content": "w5"}], "steer_special_tokens": True},
        400,
        "has no chat template",
    ),
    (
        "zero-norm normalized vector",
        "/v1/steer/completion",
        {
            **STEER,
            "features": None,
            "normalize_steering": True,
            "vectors": [{"steering_vector": [0.0] * 32, "strength": 1.0, "hook": "blocks.0.hook_resid_post"}],
        },
        400,
        "has norm 0, so it cannot be normalized",
    ),
    (
        "huge cossim num_results",
        "/v1/util/sae-topk-by-decoder-cossim",
        {"model": "tiny", "source": "0-res", "num_results": 1000, "vector": [0.0] * 32},
        400,
        "(--max-similar)",
    ),
    (
        "feature and vector to compare",
        "/v1/util/sae-topk-by-decoder-cossim",
        {"model": "tiny", "source": "0-res", "num_results": 3},
        400,
        "give a feature or a vector to compare with: exactly one",
    ),
    (
        "wrong field type",
        "/v1/activation/all",
        {**ALL, "num_results": "5"},
        422,
        "num_results: Input should be a valid integer (got '5')",
    ),
    (
        "missing field",
        "/v1/activation/all",
        {k: v for k, v in ALL.items() if k != "ignore_bos"},
        422,
        "ignore_bos is missing",
    ),
    (
        "unknown field",
        "/v1/activation/all",
        {**ALL, "layers": [1]},
        422,
        "layers is not a field of this request; remove it",
    ),
    (
        "graph without a prompt",
        "/generate-graph",
        {"model_id": "tiny", "slug_identifier": "g"},
        400,
        "the prompt is empty",
    ),
    (
        "huge graph batch",
        "/generate-graph",
        {"model_id": "tiny", "prompt": PROMPT, "slug_identifier": "g", "batch_size": 10**6},
        400,
        "(--max-graph-batch)",
    ),
    (
        "negative graph nodes",
        "/generate-graph",
        {"model_id": "tiny", "prompt": PROMPT, "slug_identifier": "g", "max_feature_nodes": -5},
        400,
        "max_feature_nodes=-5; give 1 or more",
    ),
    (
        "threshold outside [0, 1]",
        "/generate-graph",
        {"model_id": "tiny", "prompt": PROMPT, "slug_identifier": "g", "node_threshold": 2},
        400,
        "node_threshold=2.0; give a number from 0 to 1",
    ),
    (
        "QK tracing",
        "/generate-graph",
        {"model_id": "tiny", "prompt": PROMPT, "slug_identifier": "g", "enable_qk_tracing": True},
        422,
        "QK tracing",
    ),
    (
        "negative /steer tokens",
        "/steer",
        {"model_id": "tiny", "prompt": PROMPT, "features": [], "n_tokens": -1},
        400,
        "n_tokens=-1; give 1 or more",
    ),
]


@pytest.mark.parametrize("what,route,payload,status,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_request_gets_one_clear_4xx(live, what, route, payload, status, words):
    _, url = live
    got, body = _call(url, route, payload)
    assert got == status and words in body["error"], body
    assert "\n" not in body["error"] and list(body) == ["error"]


def test_malformed_json_and_bodies_too_large(live):
    _, url = live
    status, body = raw(url, "POST", "/v1/activation/all", b'{"prompt": "w5", "model": ', AUTH)
    assert status == 422 and body["error"].startswith("the body is not valid JSON")
    big = json.dumps({**SINGLE, "prompt": "w5 " * 20_000}).encode()
    status, body = raw(url, "POST", "/v1/activation/single", big, AUTH)
    assert (
        status == 413 and "larger than this server's limit of 20000 bytes (--max-body-bytes)" in body["error"]
    )
    # a chunked body, with no Content-Length to refuse it by: refused once the bytes received pass the limit
    host, port = url.rsplit(":", 1)[0].split("//")[1], int(url.rsplit(":", 1)[1])
    with socket.create_connection((host, port)) as s:
        head = _head("/v1/activation/single", "Transfer-Encoding: chunked")
        s.sendall(
            head.encode()
            + b"".join(
                b"%x\r\n%s\r\n" % (len(c), c) for c in [big[i : i + 4096] for i in range(0, len(big), 4096)]
            )
            + b"0\r\n\r\n"
        )
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413"), answer


def test_the_secret_is_asked_of_every_request(live):
    served, url = live
    status, body = post(url, "/v1/activation/single", SINGLE)
    assert (
        status == 401
        and "needs its secret in the x-secret-key header; the request has no x-secret-key" in body["error"]
    )
    status, body = post(url, "/v1/activation/single", SINGLE, {"x-secret-key": "guess"})
    assert status == 401 and "has a wrong x-secret-key" in body["error"]
    for path in ("/files/graphs/index.html", "/api/folders", "/docs", "/no/such/route"):
        assert raw(url, "GET", path)[0] == 401
    with pytest.raises(ApiException) as refused:
        client(url).activation_single_post(npc.ActivationSinglePostRequest(**SINGLE))
    assert refused.value.status == 401
    r = client(url, SECRET).activation_single_post(npc.ActivationSinglePostRequest(**SINGLE))
    assert len(r.activation.values) == 3  # w5 w9 w12, the BOS left out


@pytest.mark.parametrize(
    "path,status,words",
    [
        ("/files/graphs/../secret.txt", 400, "climbs with '..'"),
        ("/files/graphs/%2e%2e/secret.txt", 400, "climbs with '..'"),
        ("/files/graphs//etc/passwd", 400, "is absolute"),
        ("/files/graphs/%2Fetc%2Fpasswd", 400, "is absolute"),
        ("/files/graphs/a%5C..%5Csecret.txt", 400, "a NUL or a backslash"),
        ("/files/graphs/a%00b", 400, "a NUL or a backslash"),
        ("/files/graphs/out", 403, "a link leading outside the served folders"),
        ("/files/graphs/loop", 404, "cannot be read"),
        ("/files/secret.txt", 404, "no folder 'secret.txt' is served; the folders are ['graphs']"),
        ("/files/graphs/missing.json", 404, "graphs/missing.json does not exist"),
    ],
)
def test_files_come_only_from_the_named_folders(live, path, status, words):
    _, url = live
    got, body = raw(url, "GET", path, headers=AUTH)
    assert got == status and words in body["error"], body


def test_a_full_queue_refuses_at_once(live):
    served, url = live
    release = threading.Event()
    served.model.add_hook("hook_embed", lambda x, hook: release.wait(10) and None, is_permanent=True)
    try:
        results = []
        long = {**STEER, "n_completion_tokens": 2}
        threads = [
            threading.Thread(target=lambda: results.append(_call(url, "/v1/steer/completion", long)))
            for _ in range(2)
        ]
        threads[0].start()
        _until(lambda: served.engine.running == 1)  # the first one runs
        threads[1].start()
        _until(lambda: served.engine.waiting == 1)  # the second waits
        status, body = _call(url, "/v1/steer/completion", long)
        assert (
            status == 503
            and "1 requests are already waiting for the model, this server's limit (--max-waiting)"
            in body["error"]
        )
    finally:
        release.set()
        for t in threads:
            t.join()
        served.model.reset_hooks(including_permanent=True)
    assert [s for s, _ in results] == [200, 200]


def _slow(served, calls):
    def slow(x, hook):
        calls.append(time.monotonic())
        time.sleep(0.05)

    served.model.add_hook("hook_embed", slow, is_permanent=True)


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_goes_away_stops_its_generation(live, stream):
    served, url = live
    calls, cancelled = [], served.engine.cancelled
    _slow(served, calls)
    try:
        body = json.dumps({**STEER, "n_completion_tokens": 50, "stream": stream}).encode()
        host, port = url.split("//")[1].split(":")
        s = socket.create_connection((host, int(port)))
        head = _head("/v1/steer/completion", f"Content-Length: {len(body)}")
        s.sendall(head.encode() + body)
        if stream:
            received = b""
            while b"data: " not in received:  # until the first frame has come
                received += s.recv(65536)
        else:
            _until(lambda: len(calls) >= 3)  # generating
        s.close()
        _until(lambda: served.engine.cancelled == cancelled + 1)
        stopped = len(calls)
        time.sleep(0.3)
        assert len(calls) == stopped < 20  # no forward pass after the stop; far from 50 tokens
    finally:
        served.model.reset_hooks(including_permanent=True)
    status, body = _call(url, "/v1/steer/completion", STEER)  # the server goes on
    assert status == 200 and len(body["outputs"]) == 1


def test_the_server_answers_after_every_bad_request(live):
    _, url = live
    status, body = _call(url, "/v1/activation/all", ALL)
    assert status == 200 and len(body["activations"]) == 5


def _head(path: str, length: str) -> str:
    """A POST's request line and headers, written out for a socket."""
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: x",
        f"x-secret-key: {SECRET}",
        "Content-Type: application/json",
        length,
    ]
    return "\r\n".join(lines) + "\r\n\r\n"


def _until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_folders_and_hosts_are_checked_before_serving(tmp_path: Path):
    from interp.serve.guard import check_host

    check_host("127.0.0.1", None)
    check_host("::1", None)
    check_host("0.0.0.0", "s")
    with pytest.raises(ValueError, match="--host 0.0.0.0 lets other machines reach the model; give a secret"):
        check_host("0.0.0.0", None)
    with pytest.raises(ValueError, match="--secret is empty"):
        check_host("127.0.0.1", "")
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        Folders([tmp_path / "nothing"])
