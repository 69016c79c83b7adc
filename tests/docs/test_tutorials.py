"""The tutorial notebooks run top to bottom on a Python kernel, and what they commit is what build.py writes.

Each notebook asserts the results its text states, so an error or an output that no longer shows what the text
says fails here. The kernel runs on one thread in a fresh folder, with this checkout first on its path.
"""

from __future__ import annotations

import importlib
import importlib.util
import os

import pytest

from tests.docs.pages import ROOT, links_in


def _need(name: str):
    """The module, or a skip saying why; under CI (``CI`` set) a missing test dependency fails instead."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')", allow_module_level=True)


nbformat = _need("nbformat")
nbclient = _need("nbclient")

TUTORIALS = ROOT / "docs" / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
CELL_TIMEOUT_S = 300  # a bound, not a target: each notebook takes about a minute on one idle thread


def _build():
    spec = importlib.util.spec_from_file_location("tutorials_build", TUTORIALS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notebooks_are_the_ones_build_py_writes_without_outputs():
    build = _build()
    assert sorted(build.NOTEBOOKS) == [p.name for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        assert path.read_text(encoding="utf-8") == build.render(build.NOTEBOOKS[path.name]), (
            f"{path.name} differs from what docs/tutorials/build.py writes: run the script"
        )
        cells = nbformat.read(path, as_version=4).cells
        assert all(
            not c.get("outputs") and c.get("execution_count") is None for c in cells if c.cell_type == "code"
        )


def test_every_result_stated_in_a_notebook_is_asserted_by_code():
    # each notebook checks its story in code: at least one assert per code cell after the imports
    for path in NOTEBOOKS:
        code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        unchecked = [i for i, source in enumerate(code[1:], 1) if "assert" not in source]
        assert not unchecked, f"{path.name}: code cells {unchecked} assert nothing"


def test_the_notebooks_links_resolve():
    for path in NOTEBOOKS:
        text = "\n".join(
            c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"
        )
        broken = [t for t in links_in(text) if t and not (path.parent / t).exists()]
        assert not broken, f"{path.name}: {broken}"


def test_the_readme_lists_every_notebook():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {target for target in links_in(readme) if target.startswith("docs/tutorials/")}
    missing = [p.name for p in NOTEBOOKS if f"docs/tutorials/{p.name}" not in linked]
    assert not missing, f"README.md's contents do not link {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    _need("ipykernel")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    )
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on the first failure
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
