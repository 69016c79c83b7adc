"""The GGUF cache: the second load reads converted weights instead of dequantizing, keyed by content."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from interp.load import cache, checkpoint, load_checkpoint
from tests.load.builders import SEED, byte_level_bpe, write_llama_gguf
from tests.load.families import tiny_llama


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    bpe = byte_level_bpe()
    return write_llama_gguf(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path_factory.mktemp("c") / "tiny.gguf")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("INTERP_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "interp"
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


def test_second_load_comes_from_the_cache(cache_dir, gguf_path, monkeypatch):
    cfg, state, tokenizer = load_checkpoint(gguf_path)
    digest = cache.file_sha256(gguf_path)
    entry = cache.entry_path(digest)
    assert entry.is_file() and entry.parent.parent == cache_dir
    assert not list(entry.parent.glob(".*.tmp"))  # written under a temporary name, then renamed

    def no_reading(*args, **kwargs):
        raise AssertionError("the GGUF file was parsed although the cache holds it")

    def no_hashing(*args, **kwargs):
        raise AssertionError("the digest was recomputed although size and mtime are unchanged")

    monkeypatch.setattr(checkpoint, "GGUFFile", no_reading)
    monkeypatch.setattr(cache.hashlib, "sha256", no_hashing)
    cfg2, state2, tokenizer2 = load_checkpoint(gguf_path)
    assert cfg2 == cfg
    assert state2.keys() == state.keys()
    for name in state:
        assert torch.equal(state2[name], state[name]), name
    assert tokenizer2.to_tokens(SEED).ids.tolist() == tokenizer.to_tokens(SEED).ids.tolist()
    assert (tokenizer2.bos_id, tokenizer2.n_ctx, tokenizer2.prepends_bos) == (0, 128, True)


def test_touching_the_file_rehashes_but_keeps_the_entry(cache_dir, gguf_path):
    load_checkpoint(gguf_path)
    digest = cache.file_sha256(gguf_path)
    stat = gguf_path.stat()
    os.utime(gguf_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert cache.file_sha256(gguf_path) == digest  # same bytes, same key


def test_damaged_entry_is_rebuilt(cache_dir, gguf_path):
    _, state, _ = load_checkpoint(gguf_path)
    entry = cache.entry_path(cache.file_sha256(gguf_path))
    entry.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="ignoring a damaged cache entry"):
        _, again, _ = load_checkpoint(gguf_path)
    assert torch.equal(again["embed.W_E"], state["embed.W_E"])
    assert entry.stat().st_size > 1000


def test_unwritable_cache_only_warns(tmp_path, monkeypatch, gguf_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("INTERP_CACHE", str(blocker))
    with pytest.warns(UserWarning, match="could not"):
        cfg, _, _ = load_checkpoint(gguf_path)
    assert cfg.n_layers == 2


def test_use_cache_false_writes_nothing(cache_dir, gguf_path):
    load_checkpoint(gguf_path, use_cache=False)
    assert not cache_dir.exists()


def test_cached_tensors_keep_their_memory_layout(cache_dir, gguf_path):
    """Tensors come back with the strides they were converted in, so a model takes them over without a copy."""
    _, state, _ = load_checkpoint(gguf_path)
    _, cached, _ = load_checkpoint(gguf_path)
    transposed = [name for name, t in state.items() if not t.is_contiguous()]
    assert transposed  # the per-head weights are views in nn.Linear's layout
    for name, tensor in state.items():
        assert cached[name].stride() == tensor.stride(), name
        assert torch.equal(cached[name], tensor), name


def test_two_loads_at_once_convert_once(cache_dir, gguf_path, monkeypatch):
    """Two callers (threads here; pytest's workers are processes, and the lock is the kernel's either way) load
    one GGUF file at the same moment into an empty cache: one converts, the other waits and reads its entry."""
    conversions, both_asked = [], threading.Barrier(2)
    convert = checkpoint._convert_gguf

    def slow_convert(path):
        conversions.append(path)
        time.sleep(0.5)  # the other caller asks while this one converts
        return convert(path)

    monkeypatch.setattr(checkpoint, "_convert_gguf", slow_convert)
    cache.file_sha256(gguf_path)  # remembered first, so both callers reach the entry at once
    loaded = {}

    def load(name):
        both_asked.wait(timeout=30)
        loaded[name] = load_checkpoint(gguf_path)

    callers = [threading.Thread(target=load, args=(name,)) for name in ("a", "b")]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(timeout=60)
    assert len(conversions) == 1
    (a_cfg, a_state, _), (b_cfg, b_state, _) = loaded["a"], loaded["b"]
    assert a_cfg == b_cfg and a_state.keys() == b_state.keys()
    for name in a_state:
        assert torch.equal(a_state[name], b_state[name]), name
    entry = cache.entry_path(cache.file_sha256(gguf_path))
    assert sorted(p.name for p in entry.parent.iterdir()) == [entry.name, entry.name + ".lock"]
