"""The tutorial notebooks run top to bottom on a Python kernel, and what they commit is what build.py writes.

Each number a notebook's text states is checked by the notebook's own code (``tutorial_claims.py`` pairs each
with its assertion, or with the line that sets it), so an error or an output that no longer shows what the text
says fails here when the notebooks run. The kernel runs on one thread in a fresh folder, with this checkout
first on its path.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re

import pytest

from tests.docs.pages import ROOT, links_in
from tests.docs.tutorial_claims import CLAIMS


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
CELL_TIMEOUT_S = 900  # a bound against a hung kernel, not a target: a cell takes seconds to a few minutes
_WORDS = (
    "three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundreds?|thousands?|"
    "millions?|billions?|twice|thrice|half|halves|thirds?|quarters?|tenths?|twentieth|dozens?"
)
NUMBER = re.compile(rf"(?<![\w.@/-])\d+(?:,\d{{3}})*(?:\.\d+)?%?(?![\w@/-])|\b(?:{_WORDS})\b", re.IGNORECASE)
PROSE_ONLY = re.compile(r"`[^`]*`|\]\([^)]*\)|\$[^$]*\$")  # code spans, link targets, formulas


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


def _numbers(text: str) -> list[re.Match]:
    """The numbers stated in markdown ``text`` (code spans, formulas and link targets left out)."""
    return list(NUMBER.finditer(_prose(text)))


def _prose(text: str) -> str:
    return " ".join(PROSE_ONLY.sub(" ", text).split())


def _code_lines(path) -> list[str]:
    code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    return [" ".join(line.split()) for source in code for line in source.splitlines()]


def test_every_number_in_the_prose_is_covered_by_a_claim():
    """Each number a markdown cell states lies inside a phrase of that cell which tutorial_claims.py lists."""
    assert sorted(CLAIMS) == [p.name for p in NOTEBOOKS]
    for path in NOTEBOOKS:
        phrases = [" ".join(claim.phrase.split()) for claim in CLAIMS[path.name]]
        unused = set(phrases)
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            text = _prose(cell.source)
            spans = []
            for phrase in phrases:
                for found in re.finditer(re.escape(phrase), text):
                    spans.append((found.start(), found.end()))
                    unused.discard(phrase)
            for number in NUMBER.finditer(text):
                covered = any(a <= number.start() and number.end() <= b for a, b in spans)
                context = text[max(0, number.start() - 50) : number.end() + 30]
                assert covered, f"{path.name}: {number.group()!r} in '...{context}...' has no claim"
        assert not unused, f"{path.name}: claims whose phrase is not in the prose: {sorted(unused)}"


def test_every_claim_is_checked_by_the_notebooks_code():
    """A result's code is an assertion of the notebook; a setting's is a line of it."""
    for path in NOTEBOOKS:
        lines = _code_lines(path)
        for claim in CLAIMS[path.name]:
            code = " ".join(claim.code.split())
            found = [line for line in lines if code in line]
            assert found, f"{path.name}: no code line holds {claim.code!r} ({claim.phrase!r})"
            if claim.result:
                asserts = [
                    line for line in found if line.startswith(("assert ", "torch.testing.assert_close("))
                ]
                assert asserts, f"{path.name}: {claim.code!r} ({claim.phrase!r}) is in no assertion"


def test_the_claims_find_numbers():
    """The extraction the two tests above rely on: numerals, number words, not code, formulas or links."""
    text = (
        "about 1.1 (6.7 against 5.6), 70,651 edges, 74% of them, nine in ten, twice, a third; not `L2.F56@1`, "
        "$\\sqrt{d}$, [02-features.ipynb](02-features.ipynb), SmolLM2-135M, L1H6, one or two"
    )
    assert [m.group() for m in _numbers(text)] == [
        "1.1", "6.7", "5.6", "70,651", "74%", "nine", "ten", "twice", "third"
    ]  # fmt: skip


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
