"""``parse_device``: a device this torch cannot use here is refused up front, naming what is available."""

from __future__ import annotations

import importlib

import pytest
import torch

from interp.load.instantiate import available_devices, parse_device


def test_usable_devices_parse():
    assert parse_device(None) is None
    assert parse_device("cpu") == torch.device("cpu")
    assert parse_device(torch.device("cpu")) == torch.device("cpu")
    assert available_devices()[0] == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a usable GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 1)])
def test_cuda_without_a_gpu_is_refused(device):
    why = "is built without CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
    with pytest.raises(
        ValueError, match=rf"device='cuda(:\d)?' cannot be used: .*{why}.*; available here: cpu"
    ):
        parse_device(device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_an_index_past_the_last_gpu_is_refused():
    count = torch.cuda.device_count()
    assert parse_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(ValueError, match=rf"there is no GPU {count}: this machine has {count}"):
        parse_device(f"cuda:{count}")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="checks a machine without MPS")
def test_mps_unavailable_is_refused():
    with pytest.raises(ValueError, match=r"device='mps' cannot be used: .*MPS.*; available here: cpu"):
        parse_device("mps")


def test_something_that_is_not_a_device():
    with pytest.raises(ValueError, match=r"device='gpu' is not a device; write one as 'cpu', 'cuda'"):
        parse_device("gpu")
    with pytest.raises(ValueError, match=r"device='cuda:-1' is not a device"):
        parse_device("cuda:-1")


def test_load_refuses_the_device_before_reading_the_checkpoint(monkeypatch):
    instantiate = importlib.import_module("interp.load.instantiate")  # interp.load is also the function
    monkeypatch.setattr(instantiate, "load_checkpoint", lambda *a: pytest.fail("read the checkpoint first"))
    with pytest.raises(ValueError, match="cannot be used"):
        instantiate.load("smollm2-135m", device="cuda:99" if torch.cuda.is_available() else "cuda")
