"""A real OpenAI-compatible server on loopback for the tests: ``transformers serve`` on the packaged SmolLM2.

``transformers serve`` cannot serve the packaged GGUF file itself (a GGUF config names no architecture, and
transformers will not save a GGUF-quantized model), so the file is written out once as a Hugging Face folder,
with interp's own GGUF reader: the ``config.json`` and tensors in Hugging Face's names that
:func:`interp.load` reads them through, the tokenizer as ``tokenizer.json`` with the file's chat template. The
folder is kept in the tests' cache, named by the GGUF file's hash. Test processes running at once (pytest's
workers) share it: :func:`interp.atomic.built_once` writes it under a file lock, into a temporary folder beside
it that is renamed into place when complete, so a process never sees a half-written folder nor has one removed
under it.

The server runs as a child process bound to ``127.0.0.1`` on a free port, offline, with the model preloaded;
:func:`serve` waits for its health check, yields its URL, and stops it (terminate, then kill) at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from interp.atomic import built_once
from interp.load.cache import file_sha256
from interp.load.families import gguf_family_for
from interp.load.gguf_file import GGUFFile
from interp.load.gguf_tokenizer import gguf_tokenizer
from interp.load.packaged import packaged_path
from tests.load.llama_cpp import cache_root

ARCHITECTURES = {"llama": "LlamaForCausalLM"}
START_TIMEOUT = 600.0


def hf_folder(name: str = "smollm2-135m") -> Path:
    """The packaged GGUF model as a Hugging Face folder (written once, then found in the cache)."""
    gguf = packaged_path(name)
    target = cache_root() / f"hf-{name}-{file_sha256(gguf)[:10]}"
    return built_once(target, lambda folder: _write_hf_folder(gguf, folder))


def _write_hf_folder(gguf: Path, target: Path) -> None:
    from safetensors.torch import save_file

    file = GGUFFile(gguf)
    config, tensors = gguf_family_for(file.architecture, str(gguf)).from_gguf(file)
    values = {**config.values, "architectures": [ARCHITECTURES[config.model_type]], "torch_dtype": "float32"}
    weights = {n: tensors.take(n, tuple(tensors._tensors[n].shape)).contiguous() for n in tensors.names()}
    save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})
    (target / "config.json").write_text(json.dumps(values, indent=1))
    tokenizer = gguf_tokenizer(file)
    tokenizer.backend.save(str(target / "tokenizer.json"))
    text = tokenizer.to_str_tokens
    special = {"bos_token": text([tokenizer.bos_id])[0], "eos_token": text([tokenizer.eos_id])[0]}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": file.get("tokenizer.chat_template"),
        "pad_token": special["eos_token"],
        **special,
    }
    (target / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=1))
    (target / "generation_config.json").write_text(
        json.dumps({"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id})
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(folder: Path, log: Path, *options: str) -> Iterator[str]:
    """Run ``transformers serve FOLDER`` on loopback, with more ``options`` if given; yields the API root
    (``http://127.0.0.1:PORT/v1``)."""
    port = free_port()
    command = [
        str(Path(sys.executable).with_name("transformers")),
        "serve",
        str(folder),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--dtype",
        "float32",
        *options,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        _wait(f"http://127.0.0.1:{port}/health", process, log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        _stop(process)


def _wait(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"transformers serve exited with {process.returncode}: {log.read_text()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(1.0)
    _stop(process)
    raise RuntimeError(
        f"transformers serve did not answer {url} within {START_TIMEOUT:.0f} s: {log.read_text()[-2000:]}"
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
