"""Shared test setup.

torch on two threads slows badly when the other core is busy, so the suite runs single-threaded. Tests that
need an accelerator read ``INTERP_DEVICE`` (default ``cpu``).

Under pytest-xdist's ``--dist loadgroup`` (``scripts/run_tests.sh``) a test module whose tests share a fixture
of module (or class, package) scope is one work unit, run by one worker: spread test by test over two workers,
each would build that fixture (a model, a reference graph, a converter's run) for its share. Those units hold
several tests, so xdist hands them out first (largest first) and the single tests that remain even out the
end of the run.
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


SHARED_SCOPES = ("module", "class", "package")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Each test that uses a fixture of the suite's own (not pytest's) with a scope in :data:`SHARED_SCOPES`, and has no
    ``xdist_group`` of its own, joins its module's group (see the module docstring)."""
    if config.getoption("dist", default="no") != "loadgroup":
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _shares_a_fixture(item) -> bool:
    infos = getattr(item, "_fixtureinfo", None)
    if infos is None:  # not a function (a doctest)
        return False
    return any(
        definition.scope in SHARED_SCOPES and definition.baseid != ""  # "": pytest's or a plugin's
        for definitions in infos.name2fixturedefs.values()
        for definition in definitions
    )


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
