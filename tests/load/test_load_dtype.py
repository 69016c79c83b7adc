"""Loading a checkpoint in its own dtype gives exactly the numbers that converting it to float32 first gave.

The converters take each tensor in the dtype its checkpoint stores it and convert it once, when it is assigned
(``interp.load.tensors``). For every family, a bfloat16 (and a float16) checkpoint is loaded in bfloat16 and in
float32, and each parameter is compared bit for bit with the same checkpoint upcast to float32 on disk and then
loaded: the path every checkpoint took before, when the converters worked in float32.
"""

from __future__ import annotations

import pytest
import torch

from interp.load import load, load_checkpoint
from interp.load.assign import file_mappings, hand_back_pages
from tests.load.builders import byte_level_bpe, save_folder, wordpiece
from tests.load.families import FAMILIES, MOE, build

NAMES = (*FAMILIES, *MOE, "llama", "qwen2", "mistral", "gpt2", "bert")


def _folders(name: str, stored: torch.dtype, tmp_path):
    tokenizer = wordpiece() if name == "bert" else byte_level_bpe()
    model = build(name, tokenizer.get_vocab_size()).to(stored)
    narrow = save_folder(model, tokenizer, tmp_path / "stored")
    wide = save_folder(model.to(torch.float32), tokenizer, tmp_path / "float32")  # exact: a wider format
    return narrow, wide


def _assert_same_parameters(model, reference):
    ours, theirs = model.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys()
    for key, value in ours.items():
        assert value.dtype == theirs[key].dtype, key
        assert torch.equal(value, theirs[key]), key


@pytest.mark.parametrize("name", NAMES)
def test_a_bfloat16_checkpoint_loads_to_the_numbers_of_its_float32_copy(name, tmp_path):
    narrow, wide = _folders(name, torch.bfloat16, tmp_path)
    for dtype in ("bfloat16", "float32"):
        _assert_same_parameters(load(narrow, dtype=dtype), load(wide, dtype=dtype))


def test_a_float16_checkpoint_loads_to_the_numbers_of_its_float32_copy(tmp_path):
    narrow, wide = _folders("gemma2", torch.float16, tmp_path)
    for dtype in ("float16", "bfloat16", "float32"):
        _assert_same_parameters(load(narrow, dtype=dtype), load(wide, dtype=dtype))
    model = load(narrow)  # no dtype: float32, as before
    assert model.blocks[0].attn.W_Q.dtype == torch.float32


def test_load_checkpoint_returns_float32_unless_asked_to_keep_the_stored_dtype(tmp_path):
    narrow, _ = _folders("llama", torch.bfloat16, tmp_path)
    _, state, _ = load_checkpoint(narrow)
    assert {t.dtype for t in state.values()} == {torch.float32}
    _, kept, _ = load_checkpoint(narrow, dtype=None)
    assert kept["blocks.0.attn.W_Q"].dtype == torch.bfloat16
    assert torch.equal(kept["blocks.0.attn.W_Q"].float(), state["blocks.0.attn.W_Q"])


def test_pages_handed_back_are_read_again_from_the_file_and_other_memory_is_left_alone(tmp_path):
    from safetensors.torch import load_file, save_file

    values = torch.randn(64, 1024)  # 256 KiB: many whole pages
    save_file({"w": values}, tmp_path / "w.safetensors")
    mapped = load_file(tmp_path / "w.safetensors")["w"]
    assert torch.equal(mapped, values)  # every page read, so resident
    files = file_mappings()
    assert any(lo <= mapped.data_ptr() < hi for lo, hi in files)
    hand_back_pages(mapped, files)
    assert torch.equal(mapped, values)  # the file's values, read again
    anonymous = values.clone()
    assert not any(lo <= anonymous.data_ptr() < hi for lo, hi in files)
    hand_back_pages(anonymous, files)  # not a file's pages: untouched
    assert torch.equal(anonymous, values)
