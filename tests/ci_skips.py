"""Under CI every test runs: a skip is a failure unless it is for hardware CI does not have.

CI is a CPU machine with every test dependency installed (the test extras, the packaged models, Chromium,
llama.cpp's converter, the reference libraries' environments). A test that skips there for any other reason (a
package or a model that did not install, a browser that did not start, a file system that refused) would pass
the run while checking nothing, so under CI (``CI`` set and not ``false``/``0``) ``tests/conftest.py`` turns such
a skip into a failure that says why. The only skips allowed are those whose reason names hardware: a GPU (CUDA)
or Apple's MPS, needed by a test or absent for one that checks a machine without it.
"""

from __future__ import annotations

import re

from tests.load.llama_cpp import required as under_ci

ALLOWED = re.compile(r"\b(GPU|CUDA|MPS)\b")
"""A skip reason CI may give: it names hardware that CI lacks (or has not, for a test of a machine without it)."""

__all__ = ["ALLOWED", "refused", "refuse_under_ci", "under_ci"]


def refused(reason: str) -> bool:
    """Whether a skip for ``reason`` must fail under CI."""
    return ALLOWED.search(reason) is None


def _reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def refuse_under_ci(report) -> None:
    """Turns a skipped test or collection ``report`` into a failure under CI, unless its reason is allowed."""
    if not (report.skipped and under_ci()) or hasattr(report, "wasxfail"):
        return
    reason = _reason(report)
    if refused(reason):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI, where every test must run: {reason!r}; install what it needs "
            "(bash scripts/run_tests.sh does), or give a reason naming the GPU/CUDA/MPS it lacks"
        )
