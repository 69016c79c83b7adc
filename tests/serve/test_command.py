"""``interp serve`` as a command: its mistakes end in one line before the model loads, and a real process
started by it answers the published client and stops on Ctrl-C with nothing left behind, also in the middle
of a graph."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from interp.cli import main
from interp.sae import save_transcoders
from tests.circuits.test_golden import GOLDEN, golden_case
from tests.circuits.transcoders import tiny_transcoders
from tests.serve.helpers import free_port, post

MODEL = str(GOLDEN / "llama")


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--host", "0.0.0.0"],
            "--host 0.0.0.0 lets other machines reach the model; give a secret with --secret S",
        ),
        (["--secret", ""], "--secret is empty"),
        (["--dictionary", "no/such/sae"], "--dictionary no/such/sae does not exist"),
        (["--transcoders", "no/such/tc"], "--transcoders no/such/tc does not exist"),
        (["--folder", "no/such/folder"], "--folder no/such/folder is not a folder"),
        (["--source-set", "a"], "--source-set names dictionaries, and none is given"),
        (["--max-prompt-tokens", "0"], "--max-prompt-tokens"),
        (["--port", "70000"], "--port 70000; give a port from 0 to 65535"),
    ],
)
def test_mistakes_end_in_one_line_before_the_model_loads(capsys, argv, message):
    assert main(["serve", MODEL, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_a_port_in_use_and_set_names_that_do_not_match(capsys, tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    for f in folders:
        f.mkdir()
    argv = ["serve", MODEL, "--dictionary", str(folders[0]), "--dictionary", str(folders[1])]
    assert main([*argv, "--source-set", "x", "--source-set", "y", "--source-set", "z"]) == 2
    assert "--source-set is given 3 times for 2 dictionaries" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", MODEL, "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is in use; give another with --port" in capsys.readouterr().err


@pytest.fixture
def slow_graph_folder(tmp_path):
    """Transcoders wide enough that a graph at one row per backward pass takes many seconds."""
    model, *_ = golden_case("llama-per-layer")
    return save_transcoders(tiny_transcoders(model.cfg, d_transcoder=1024, seed=1), tmp_path / "wide")


def _start(argv: list[str], port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "interp", "serve", MODEL, "--port", str(port), "--quiet", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None, process.communicate()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)


@pytest.mark.slow
def test_ctrl_c_during_a_graph_stops_cleanly(slow_graph_folder, tmp_path):
    port = free_port()
    process = _start(["--transcoders", str(slow_graph_folder), "--model-id", "tiny"], port)
    url = f"http://127.0.0.1:{port}"
    status, body = post(url, "/v1/tokenize", {"model": "tiny", "text": "w5 w9"})
    assert status == 200 and body["tokens"] == [5, 9]
    answer = {}
    request = {"model_id": "tiny", "prompt": "w5 w9 w12 w6 w7 w8", "slug_identifier": "g", "batch_size": 1}

    def ask():
        try:
            answer["reply"] = post(url, "/generate-graph", request)
        except OSError as err:  # the connection closed with the server: a clean stop too
            answer["reply"] = err

    thread = threading.Thread(target=ask)
    thread.start()
    time.sleep(3)  # well into the backward passes
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    stopped = time.monotonic() - interrupted
    thread.join(timeout=30)
    assert process.returncode == 0, err
    assert "interp serve: stopped" in out and "Traceback" not in err
    # the graph was cut short (a finished one is a 200) and its request answered
    assert answer["reply"] == (503, {"error": "stopped: the server is shutting down"})
    assert stopped < 15
    with socket.socket() as again:  # the port is free: nothing listens on it (closed connections may linger)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen()
    assert not list(Path(tmp_path).glob("*.tmp"))


def test_the_client_speaks_to_a_server_the_command_started(tmp_path):
    port = free_port()
    process = _start(["--model-id", "tiny", "--secret", "k"], port)
    try:
        url = f"http://127.0.0.1:{port}"
        status, body = post(url, "/v1/tokenize", {"model": "tiny", "text": "w5"}, {"x-secret-key": "k"})
        assert status == 200 and body == {"tokens": [5], "token_strings": ["w5"], "prepend_bos": False}
        assert post(url, "/v1/tokenize", {"model": "tiny", "text": "w5"})[0] == 401
    finally:
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    assert (
        process.returncode == 0
        and "interp serve: tiny (source sets: none)" in out
        and "(secret required)" in out
    )
