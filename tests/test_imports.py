"""``import interp`` stays light, and the names the README uses are reachable from it as written."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import sys
import interp
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "pandas"))
assert "interp.report" not in sys.modules
view = interp.report.attention_view
from interp.report.attention_view import attention_view
assert view is attention_view and interp.analysis.logit_lens and interp.store.ActivationStore
print(heavy or "light")
"""


def test_import_interp_is_light_and_subpackages_load_on_first_use():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "light"


def test_documented_names_are_reachable_after_a_bare_import(tmp_path):
    import interp
    from tests.report.test_explain import SEED_TEXT, tiny_model

    view = interp.report.attention_view(tiny_model(), SEED_TEXT, token="it")
    assert view.tokens[view.query] == "it"
    path = view.save(tmp_path / "view.html")
    assert path.read_text(encoding="utf-8") == view.html
    assert {"analysis", "report", "store", "distributed", "load", "HookedTransformer"} <= set(dir(interp))


def test_an_unknown_attribute_is_still_an_attribute_error():
    import interp

    with pytest.raises(AttributeError, match="module 'interp' has no attribute 'reports'"):
        interp.reports  # noqa: B018
