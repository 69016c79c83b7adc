"""A failed cache run never blocks its own retry and never loses a file.

Before the first shard: nothing is left behind (no ``meta.json``, no folders the run made), and a store
that an earlier process left unstarted is taken over. After shards: the same command resumes, another one
is refused with the way out (``--overwrite``), which replaces only the store's own files.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from interp.cli import main
from interp.store import ActivationStore, StoreMismatchError, cache_activations
from interp.store.files import write_json
from interp.store.meta import FORMAT
from interp.store.writer import shard_name
from tests.store.models import HOOKS, sentences, tiny_model, write_gpt2_folder

TEXTS = sentences(12, seed=4)
LOADER = importlib.import_module("interp.load")


class Interrupt(Exception):
    pass


def stop_after_first_shard(path: Path) -> None:
    if path.name == shard_name(0):
        raise Interrupt("stopped after the first shard")


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run(folder, texts=TEXTS, **kw):
    args = dict(batch_size=4, shard_rows=5, progress=False) | kw
    return cache_activations(tiny_model(), texts, HOOKS, folder, **args)


def one_error_line(capsys, *needles: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the bad input was refused")

    monkeypatch.setattr(LOADER, "load", refuse)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_gpt2_folder(tmp_path_factory.mktemp("ckpt") / "tiny-gpt2")


def cli(checkpoint, data, out, *extra: str) -> list[str]:
    return [
        "cache",
        str(checkpoint),
        "--data",
        str(data),
        "--hooks",
        "hook_embed",
        "--out",
        str(out),
        "--quiet",
    ]


# Before the first shard --------------------------------------------------------------------------------------


def test_a_position_outside_an_item_fails_before_anything_is_written(tmp_path):
    out = tmp_path / "new" / "deeper" / "acts"
    with pytest.raises(ValueError, match=r"item \d+ has \d+ tokens; position 40 is outside it"):
        run(out, positions=[0, 40])
    assert not (tmp_path / "new").exists()  # the folders the run would have made are not there
    store = run(out, positions=[0, -1])  # the corrected command, into the same folder
    assert store.complete and len(store) == 2 * len(TEXTS)


def test_a_position_only_the_last_item_lacks_is_found_before_any_forward(tmp_path, monkeypatch):
    model = tiny_model()
    forwards = []
    real = model.run_with_cache
    monkeypatch.setattr(model, "run_with_cache", lambda *a, **k: forwards.append(1) or real(*a, **k))
    texts = ["the cat sat on the mat"] * 8 + ["the dog"]  # shards of 2 rows fill long before the last item
    with pytest.raises(ValueError, match="item 8 has 2 tokens; position 3 is outside it"):
        cache_activations(model, texts, HOOKS, tmp_path / "s", batch_size=2, shard_rows=2, positions=[3])
    assert forwards == [] and not (tmp_path / "s").exists()


def test_a_failure_in_the_first_batch_leaves_nothing(tmp_path, monkeypatch):
    model = tiny_model()
    existing = tmp_path / "acts"
    existing.mkdir()

    def broken(*args, **kwargs):
        raise Interrupt("the forward pass failed")

    monkeypatch.setattr(model, "run_with_cache", broken)
    with pytest.raises(Interrupt):
        cache_activations(model, TEXTS, HOOKS, existing, progress=False)
    assert existing.is_dir() and list(existing.iterdir()) == []  # it was there before: kept, empty
    monkeypatch.undo()
    with pytest.raises(Interrupt):  # also when it is interrupted by the user
        cache_activations(model, TEXTS, HOOKS, existing, on_shard=stop_after_first_shard, positions="last")
    assert (existing / shard_name(0)).is_file()  # a shard is worth keeping: this one stays


def test_a_store_left_unstarted_by_a_killed_run_is_taken_over(tmp_path):
    out = tmp_path / "acts"
    out.mkdir()
    identity = {"format": FORMAT, "positions": "all", "hooks": ["hook_embed"], "batch_size": 99}
    write_json(out / "meta.json", {"identity": identity, "complete": False, "shards": []})
    (out / "notes.txt").write_text("mine\n")
    store = run(out, positions="last")
    assert store.complete and store.meta["identity"]["positions"] == "last"
    assert (out / "notes.txt").read_text() == "mine\n"


def test_an_out_dir_that_is_a_file_is_refused_and_kept(tmp_path):
    target = tmp_path / "acts"
    target.write_text("not a folder\n")
    with pytest.raises(StoreMismatchError, match="is a file, not a folder"):
        run(target)
    assert target.read_text() == "not a folder\n"


def test_a_record_without_text_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"item 2 has none of the text fields"):
        cache_activations(tiny_model(), [{"text": "a"}, {"text": "b"}, {"id": 3}], HOOKS, tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_cli_refuses_bad_input_before_the_model_loads(tmp_path, checkpoint, capsys, no_loading):
    text = tmp_path / "data.txt"
    text.write_text("the cat\n")
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text('{"text": "the cat"}\n{"id": 7, "txt": "a typo"}\n')
    out = tmp_path / "acts"
    assert main([*cli(checkpoint, jsonl, out)]) == 2
    one_error_line(capsys, "interp: error: ", "data.jsonl:2 has no text", "'text' or 'sentence' or 'prompt'")
    assert main([*cli(checkpoint, text, out), "--positions", "first"]) == 2
    one_error_line(capsys, "--positions 'first'")
    assert main([*cli(checkpoint, text, out), "--positions", "0,,1"]) == 2
    one_error_line(capsys, "--positions '0,,1'")
    assert main([*cli(checkpoint, text, out), "--shard-rows", "0"]) == 2
    one_error_line(capsys, "argument --shard-rows: 0; it must be at least 1")
    argv = cli(checkpoint, text, out)
    argv[argv.index("hook_embed")] = "blocks.0.attn"
    assert main(argv) == 2
    one_error_line(capsys, "--hooks 'blocks.0.attn' is not a hook name")
    argv[argv.index("blocks.0.attn")] = "hook_embed,,blocks.0.hook_resid_post"
    assert main(argv) == 2
    one_error_line(capsys, "has an empty entry")
    argv[argv.index("hook_embed,,blocks.0.hook_resid_post")] = "blocks.*.attn.hook_pattern"
    assert main(argv) == 2
    one_error_line(capsys, "'blocks.*.attn.hook_pattern' is [batch, head, query, key]")
    binary = tmp_path / "data.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    assert main(cli(checkpoint, binary, out)) == 2
    one_error_line(capsys, "is not UTF-8 text")
    assert not out.exists()


def test_cli_retry_after_a_failure_inside_the_run(tmp_path, checkpoint, capsys):
    """A position only some items have: found once the tokenizer is loaded, before any shard."""
    data = tmp_path / "data.txt"
    data.write_text("the cat sat on the mat\nthe dog\n")
    out = tmp_path / "acts"
    assert main([*cli(checkpoint, data, out), "--positions", "0,4"]) == 2
    one_error_line(capsys, "item 1 has 2 tokens; position 4 is outside it")
    assert not out.exists()
    assert main([*cli(checkpoint, data, out), "--positions", "0,-1"]) == 0
    assert len(ActivationStore(out)) == 4


# After shards -------------------------------------------------------------------------------------------------


def test_after_shards_a_different_run_is_refused_then_overwrite_replaces_only_the_store(tmp_path):
    out = tmp_path / "acts"
    with pytest.raises(Interrupt):
        run(out, on_shard=stop_after_first_shard)
    (out / "notes.txt").write_text("mine\n")
    before = files(out)
    with pytest.raises(
        StoreMismatchError, match=r"positions was .*overwrite=True \(interp cache --overwrite\)"
    ):
        run(out, positions="last")
    assert files(out) == before
    store = run(out, positions="last", overwrite=True)
    assert store.complete and len(store) == len(TEXTS)
    assert (out / "notes.txt").read_text() == "mine\n"
    assert sorted(files(out)) == ["meta.json", "notes.txt", shard_name(0), shard_name(1), shard_name(2)]
    reference = run(tmp_path / "ref", positions="last")
    assert files(out)[shard_name(0)] == files(tmp_path / "ref")[shard_name(0)]
    assert store.index.equals(reference.index)


def test_cli_overwrite_and_the_check_before_loading(tmp_path, checkpoint, capsys, monkeypatch):
    data = tmp_path / "data.txt"
    data.write_text("the cat sat\nthe dog\n")
    out = tmp_path / "acts"
    assert main(cli(checkpoint, data, out)) == 0
    capsys.readouterr()
    before = files(out)
    real_load = LOADER.load
    monkeypatch.setattr(LOADER, "load", lambda *a, **k: pytest.fail("loaded before the store was checked"))
    assert main([*cli(checkpoint, data, out), "--positions", "last"]) == 2
    one_error_line(
        capsys, f"{out} holds another run's activation store (positions was 'all', now 'last')", "--overwrite"
    )
    assert files(out) == before
    monkeypatch.setattr(LOADER, "load", real_load)
    assert main([*cli(checkpoint, data, out), "--positions", "last", "--overwrite"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["complete"] and meta["identity"]["positions"] == "last" and meta["rows"] == 2


def test_a_folder_of_other_files_is_refused_even_with_overwrite(tmp_path, checkpoint, capsys, no_loading):
    data = tmp_path / "data.txt"
    data.write_text("the cat\n")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("months of work\n")
    for extra in ([], ["--overwrite"]):
        assert main([*cli(checkpoint, data, out), *extra]) == 2
        one_error_line(
            capsys,
            f"{out} is not empty and holds no meta.json (it holds thesis.tex)",
            "not an activation store",
        )
    assert files(out) == {"thesis.tex": b"months of work\n"}
