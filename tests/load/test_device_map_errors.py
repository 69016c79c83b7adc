"""Bad placement requests fail with one line saying what was wrong, before any weight is placed.

Requests that need no model (devices, sizes, the offload folder) are checked before the checkpoint is even
opened: the tests pass a path that does not exist, so reaching the checkpoint would raise FileNotFoundError.
"""

from __future__ import annotations

import pytest
import torch

import interp
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import tiny_llama

pytest.importorskip("accelerate")

MISSING = "/nonexistent/model/folder"
PLACED = {"embed": "cpu", "blocks.0": "cpu", "blocks.1": "cpu", "ln_final": "cpu", "unembed": "cpu"}
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_folder(tiny_llama(300), byte_level_bpe(), tmp_path_factory.mktemp("llama"))


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


@no_gpu
def test_a_gpu_this_torch_lacks_is_refused_before_the_checkpoint_is_read():
    with pytest.raises(ValueError) as err:
        interp.load(MISSING, device_map={**PLACED, "blocks.1": "cuda:1"})
    assert _one_line(err).startswith("device_map['blocks.1']: device='cuda:1' cannot be used")
    assert "available here: cpu" in str(err.value)
    with pytest.raises(ValueError, match=r"max_memory\[0\]: device='cuda:0' cannot be used"):
        interp.load(MISSING, device_map="auto", max_memory={0: "1GiB", "cpu": "1GiB"})


def test_a_device_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match=r"device_map\['embed'\]: device='gpu' is not a device"):
        interp.load(MISSING, device_map={**PLACED, "embed": "gpu"})
    with pytest.raises(ValueError, match=r"device_map='balanced'; pass 'auto' or a dict"):
        interp.load(MISSING, device_map="balanced")
    with pytest.raises(ValueError, match=r"max_memory\['cpu'\]='lots' is not a size"):
        interp.load(MISSING, device_map="auto", max_memory={"cpu": "lots"})


def test_an_offload_folder_that_cannot_be_written_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ValueError) as err:
        interp.load(MISSING, device_map="auto", offload_folder=blocker / "offload")
    assert _one_line(err).startswith(f"offload_folder='{blocker / 'offload'}' is not a writable folder")


def test_a_budget_smaller_than_one_block_is_refused(folder):
    block = sum(p.numel() * 4 for p in interp.load(folder).blocks[0].parameters())
    with pytest.raises(ValueError) as err:
        interp.load(folder, device_map="auto", max_memory={"cpu": block - 1})
    assert _one_line(err) == (
        f"max_memory['cpu']={block - 1} bytes is smaller than one block ({block} bytes in torch.float32), the "
        "unit a device map never splits; give that device at least this much, or leave it out"
    )


def test_a_dict_that_leaves_a_module_unplaced_is_refused(folder):
    placed = {k: v for k, v in PLACED.items() if k not in ("blocks.1", "ln_final")}
    with pytest.raises(ValueError) as err:
        interp.load(folder, device_map=placed)
    assert _one_line(err).startswith(
        "device_map leaves blocks.1, ln_final unplaced; give every module a device"
    )


def test_a_dict_naming_no_module_suggests_the_closest(folder):
    with pytest.raises(
        ValueError, match=r"names 'block.1', which is not a module of this model; did you mean 'blocks.1'"
    ):
        interp.load(folder, device_map={**PLACED, "block.1": "cpu"})


def test_disk_without_an_offload_folder_is_refused(folder):
    with pytest.raises(ValueError, match=r"puts blocks.1 on disk, but no offload_folder was given"):
        interp.load(folder, device_map={**PLACED, "blocks.1": "disk"})


def test_the_embedding_stays_on_a_device_that_computes(folder, tmp_path):
    with pytest.raises(ValueError, match=r"puts 'embed' on 'disk', which only stores weights here"):
        interp.load(folder, device_map={**PLACED, "embed": "disk"}, offload_folder=tmp_path)


def test_device_and_device_map_together_are_refused():
    with pytest.raises(ValueError, match=r"pass device='cpu' or device_map=\.\.\., not both"):
        interp.load(MISSING, device="cpu", device_map="auto")
    with pytest.raises(ValueError, match=r"max_memory and offload_folder go with device_map"):
        interp.load(MISSING, max_memory={"cpu": "1GiB"})
