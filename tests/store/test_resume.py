"""An interrupted run resumes into the same bytes; a folder from another model, hooks or data is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from interp.store import ActivationStore, StoreMismatchError, cache_activations
from interp.store.writer import shard_name
from tests.store.models import HOOKS, sentences, tiny_model

TEXTS = sentences(40, seed=2)


class Interrupt(Exception):
    pass


def stop_after(k: int):
    def on_shard(path: Path) -> None:
        if path.name == shard_name(k):
            raise Interrupt(f"stopped after {path.name}")

    return on_shard


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run(model, folder, texts=TEXTS, **kw):
    args = dict(batch_size=4, shard_rows=13, progress=False) | kw
    return cache_activations(model, texts, HOOKS, folder, **args)


@pytest.mark.parametrize("shard_rows", [13, 50])
def test_interrupted_runs_resume_to_identical_bytes(tmp_path, shard_rows):
    model = tiny_model()
    reference = run(model, tmp_path / "ref", shard_rows=shard_rows)
    n_batches = reference.run.batches_run
    with pytest.raises(Interrupt):
        run(model, tmp_path / "cut", shard_rows=shard_rows, on_shard=stop_after(1))
    partial = ActivationStore(tmp_path / "cut")
    assert not partial.complete and len(partial.shards) == 2
    assert files(tmp_path / "cut")[shard_name(0)] == files(tmp_path / "ref")[shard_name(0)]
    # a write killed halfway leaves a .tmp file that does not count and is replaced
    half = files(tmp_path / "ref")[shard_name(2)]
    (tmp_path / "cut" / (shard_name(2) + ".tmp")).write_bytes(half[: len(half) // 2])
    with pytest.raises(Interrupt):
        run(model, tmp_path / "cut", shard_rows=shard_rows, on_shard=stop_after(3))
    resumed = run(model, tmp_path / "cut", shard_rows=shard_rows)
    assert resumed.complete and 0 < resumed.run.batches_run < n_batches
    assert files(tmp_path / "cut") == files(tmp_path / "ref")
    assert resumed.index.equals(reference.index)


def test_interrupted_inside_a_batch(tmp_path, monkeypatch):
    """An error in the forward pass (not at a shard boundary) loses only uncommitted rows."""
    model = tiny_model()
    run(model, tmp_path / "ref")
    calls = {"n": 0}
    forward = model.run_with_cache

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 6:
            raise Interrupt("forward failed")
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "run_with_cache", failing)
    with pytest.raises(Interrupt):
        run(model, tmp_path / "cut")
    monkeypatch.undo()
    run(model, tmp_path / "cut")
    assert files(tmp_path / "cut") == files(tmp_path / "ref")


def test_complete_store_is_not_recomputed(tmp_path):
    model = tiny_model()
    run(model, tmp_path / "s")
    before = files(tmp_path / "s")
    again = run(model, tmp_path / "s")
    assert again.run.batches_run == 0 and files(tmp_path / "s") == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(model=tiny_model(seed=1)), "written by model tiny"),
        (dict(hooks=HOOKS[:2]), "hooks was"),
        (dict(positions="last"), "positions was"),
        (dict(batch_size=5), "batch_size was"),
        (dict(dtype="float16"), "dtype was"),
        (dict(texts=TEXTS + ["the cat"]), r"data.n_items was 40, now 41"),
    ],
)
def test_a_different_run_is_refused(tmp_path, change, message):
    with pytest.raises(Interrupt):
        run(tiny_model(), tmp_path / "s", on_shard=stop_after(0))
    before = files(tmp_path / "s")
    model = change.pop("model", tiny_model())
    hooks = change.pop("hooks", HOOKS)
    texts = change.pop("texts", TEXTS)
    args = dict(batch_size=4, shard_rows=13, progress=False) | change
    with pytest.raises(StoreMismatchError, match=message):
        cache_activations(model, texts, hooks, tmp_path / "s", **args)
    assert files(tmp_path / "s") == before


def test_changed_data_is_refused_on_resume(tmp_path):
    """Same length, one text changed before the resume point: the data fingerprint catches it."""
    with pytest.raises(Interrupt):
        run(tiny_model(), tmp_path / "s", on_shard=stop_after(4))
    texts = ["a dog"] + TEXTS[1:]
    with pytest.raises(StoreMismatchError, match="started on different data"):
        run(tiny_model(), tmp_path / "s", texts=texts)
