"""The Hugging Face folder the endpoint tests serve is shared by test processes running at once: it must be
written once, and no process may see it half-written or have it removed under it.

The folder is written from a tiny GGUF file here (the packaged model's 0.5 GB would make the test slow), by the
same :func:`~tests.sae.explanations.server.hf_folder`, with a second caller arriving while the first writes.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.load.builders import byte_level_bpe, write_llama_gguf
from tests.load.families import tiny_llama
from tests.sae.explanations import server

TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


@pytest.fixture
def tiny_gguf(tmp_path, monkeypatch):
    bpe = byte_level_bpe()
    path = write_llama_gguf(
        tiny_llama(bpe.get_vocab_size()),
        bpe,
        tmp_path / "tiny.gguf",
        extra=lambda w: w.add_chat_template(TEMPLATE),
    )
    monkeypatch.setattr(server, "packaged_path", lambda name: path)
    monkeypatch.setattr(server, "cache_root", lambda: tmp_path / "cache")
    return path


def test_two_callers_at_once_build_the_folder_once_and_never_see_it_half_written(tiny_gguf, monkeypatch):
    conversions, seen, second_started = [], [], threading.Event()
    real_file, real_tokenizer = server.GGUFFile, server.gguf_tokenizer

    def counting_file(path):
        conversions.append(path)
        return real_file(path)

    def slow_tokenizer(file):
        target = next((p for p in server.cache_root().glob("hf-*") if p.is_dir()), None)
        seen.append(None if target is None else (target / ".complete").is_file())
        if len(seen) == 1:  # the first writer, mid-write: let the second caller arrive and act
            second_started.wait(timeout=10)
            time.sleep(0.5)
        return real_tokenizer(file)

    monkeypatch.setattr(server, "GGUFFile", counting_file)
    monkeypatch.setattr(server, "gguf_tokenizer", slow_tokenizer)
    found = {}

    def caller(name: str) -> None:
        if name == "second":
            second_started.set()
        found[name] = server.hf_folder()

    first = threading.Thread(target=caller, args=("first",))
    first.start()
    while not seen and first.is_alive():
        time.sleep(0.01)
    second = threading.Thread(target=caller, args=("second",))
    second.start()
    first.join(timeout=60)
    second.join(timeout=60)
    assert found["first"] == found["second"] and (found["first"] / ".complete").is_file()
    assert len(conversions) == 1  # the second caller waited for the first, then found the folder done
    assert seen == [None]  # while it was written, no folder under the final name, complete or not
    target = found["first"]
    assert sorted(p.name for p in target.iterdir()) == [
        ".complete", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json",
    ]  # fmt: skip
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name, target.name + ".lock"]
