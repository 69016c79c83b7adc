"""Shared test setup.

torch on two threads slows badly when the other core is busy, so the suite runs single-threaded. Tests that
need an accelerator read ``INTERP_DEVICE`` (default ``cpu``).
"""

import os

import pytest
import torch

from tests.ci_skips import refuse_under_ci

torch.set_num_threads(1)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEVICE = os.environ.get("INTERP_DEVICE", "cpu")


@pytest.fixture
def device() -> str:
    return DEVICE


@pytest.fixture(autouse=True)
def _grad_mode_on():
    """Every test starts with autograd on, whatever an earlier one did to the global mode, and with torch's
    global generator seeded, so that a test drawing inputs without a generator of its own draws the same ones on
    every run and in any order (a failure can be repeated; a pass is not luck of the draw)."""
    torch.set_grad_enabled(True)
    torch.manual_seed(0)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a skip fails, unless it is for a GPU or MPS (tests/ci_skips.py)."""
    outcome = yield
    refuse_under_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a module skipped while it is collected (``importorskip``)."""
    outcome = yield
    refuse_under_ci(outcome.get_result())
