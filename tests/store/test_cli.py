"""``interp cache`` on a checkpoint folder: text and JSONL data, the summary line, actionable errors."""

from __future__ import annotations

import json

import pytest
import torch

from interp.cli import main
from interp.load import load
from interp.store import ActivationStore, cache_activations, read_items
from tests.store.models import sentences, write_gpt2_folder

HOOKS = "blocks.0.hook_resid_post,blocks.1.attn.hook_z"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_gpt2_folder(tmp_path_factory.mktemp("ckpt") / "tiny-gpt2")


def test_cache_command_matches_the_python_api(tmp_path, checkpoint, capsys):
    texts = sentences(11, seed=5)
    data = tmp_path / "data.txt"
    data.write_text("\n".join(texts) + "\n\n")
    argv = ["cache", str(checkpoint), "--data", str(data), "--hooks", HOOKS, "--out", str(tmp_path / "cli")]
    rc = main([*argv, "--batch-size", "3", "--positions", "0,-1", "--shard-rows", "7", "--quiet"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "22 rows x 2 hooks in 4 shards" in out and "rows/s" in out
    store = ActivationStore(tmp_path / "cli")
    direct = cache_activations(
        load(checkpoint), texts, HOOKS.split(","), tmp_path / "api",
        batch_size=3, positions=[0, -1], shard_rows=7, progress=False,
    )  # fmt: skip
    assert store.index.equals(direct.index)
    for hook in HOOKS.split(","):
        assert torch.equal(store.tensor(hook), direct.tensor(hook))


def test_jsonl_records_keep_their_ids(tmp_path, checkpoint):
    rows = [{"id": "wg-1", "sentence": "the cat sat"}, {"id": "wg-2", "prompt": "a dog"}, {"text": "it was"}]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = [
        "cache",
        str(checkpoint),
        "--data",
        str(data),
        "--hooks",
        "hook_embed",
        "--out",
        str(tmp_path / "s"),
    ]
    assert main([*argv, "--positions", "last", "--quiet"]) == 0
    index = ActivationStore(tmp_path / "s").index
    assert index["item_id"].tolist() == ["wg-1", "wg-2", None]
    assert index["token"].tolist() == ["sat", "dog", "was"]


def test_errors_are_reported_not_raised(tmp_path, checkpoint, capsys):
    good = tmp_path / "good.txt"
    good.write_text("the cat\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "the cat"}\n{"text": \n')
    base = ["cache", str(checkpoint), "--hooks", "hook_embed", "--quiet"]
    assert main([*base, "--data", str(bad), "--out", str(tmp_path / "a")]) == 2
    assert "bad.jsonl:2 is not valid JSON" in capsys.readouterr().err
    assert main([*base, "--data", str(good), "--out", str(tmp_path / "b"), "--positions", "first"]) == 2
    assert "--positions 'first'" in capsys.readouterr().err
    assert main([*base, "--data", str(tmp_path / "none.txt"), "--out", str(tmp_path / "c")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert read_items(good) == ["the cat"]


def test_the_placement_is_checked_once(tmp_path, monkeypatch):
    import interp.preflight as preflight

    calls = []
    real = preflight.check_placement
    monkeypatch.setattr(preflight, "check_placement", lambda args: calls.append(1) or real(args))
    data = tmp_path / "data.txt"
    data.write_text("the cat sat\n")
    folder = tmp_path / "gpt2"
    write_gpt2_folder(folder)
    assert main(["cache", str(folder), "--data", str(data), "--hooks", "blocks.0.hook_resid_post", "--out",
                 str(tmp_path / "acts"), "--quiet"]) == 0  # fmt: skip
    assert calls == [1]
