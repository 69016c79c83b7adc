"""A model folder's weights: model.safetensors, an index of shards, or the only safetensors file of any name."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch

from interp.load import CheckpointError, load
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import tiny_llama


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    bpe = byte_level_bpe()
    return save_folder(tiny_llama(bpe.get_vocab_size()), bpe, tmp_path_factory.mktemp("llama") / "model")


@pytest.fixture
def renamed(tmp_path, folder):
    target = tmp_path / "renamed"
    shutil.copytree(folder, target)
    (target / "model.safetensors").rename(target / "weights.safetensors")
    return target


def test_the_only_safetensors_file_is_read_whatever_its_name(folder, renamed, caplog):
    ids = torch.tensor([[1, 5, 9, 42, 7]])
    want = load(folder)(ids)
    with caplog.at_level(logging.INFO, logger="interp.load"):
        got = load(renamed)(ids)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert any(
        "reading the weights from its only safetensors file, weights.safetensors" in r.getMessage()
        for r in caplog.records
    )


def test_errors_about_its_tensors_name_the_file(renamed):
    config = json.loads((renamed / "config.json").read_text())
    (renamed / "config.json").write_text(json.dumps(config | {"num_key_value_heads": 1}))
    with pytest.raises(CheckpointError, match=r"in .*renamed/weights.safetensors has shape"):
        load(renamed)


def test_several_unindexed_safetensors_files_are_refused_naming_them(renamed):
    shutil.copy(renamed / "weights.safetensors", renamed / "adapter.safetensors")
    with pytest.raises(CheckpointError) as caught:
        load(renamed)
    message = str(caught.value)
    assert "several safetensors files (adapter.safetensors, weights.safetensors)" in message
    assert (
        "no model.safetensors.index.json" in message and "name the model's file model.safetensors" in message
    )


def test_model_safetensors_wins_over_other_files(tmp_path, folder):
    target = tmp_path / "with-adapter"
    shutil.copytree(folder, target)
    (target / "adapter.safetensors").write_bytes(b"not read")
    ids = torch.tensor([[3, 4, 5]])
    torch.testing.assert_close(load(target)(ids), load(folder)(ids), rtol=0, atol=0)


def test_no_weights_at_all(renamed):
    (renamed / "weights.safetensors").unlink()
    with pytest.raises(
        FileNotFoundError, match=r"has no model.safetensors nor any other \*.safetensors file"
    ):
        load(renamed)
