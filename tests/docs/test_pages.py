"""Every Python example and command in the README and in ``docs/`` runs as written, and every link between pages
resolves.

Examples on the packaged SmolLM2 are slow (the model loads once for all of them: ``interp.load`` is memoised
for the packaged name while these tests run). Each page runs in a fresh folder, so files an example writes
(``circuit.json``, ``reports/prev``) land there.
"""

from __future__ import annotations

import functools
import re
import shlex

import pytest

import interp
from tests.docs.pages import ROOT, blocks, commands, pages, python_blocks, relative_links, runnable_blocks

PACKAGED = "smollm2-135m"
# Pages whose examples a test of their own runs, asserting what the page says they print: run once, there.
OWN_TESTS = {
    "docs/transcoders.md": "tests/sae/transcoder/test_docs.py",
    "docs/attribution-graphs.md": "tests/circuits/test_docs.py",
    "docs/qk-attribution.md": "tests/analysis/test_qk_doc.py",
    "docs/transformer-lens.md": "tests/compat/test_docs.py",
    "docs/sae-lens.md": "tests/compat/test_docs.py",
    "docs/devices.md": "tests/test_docs_devices.py",
    "docs/commands.md": "tests/test_docs_commands.py",
}


def _page_params() -> list:
    params = []
    for page in pages():
        code = runnable_blocks(page)
        if not code:
            continue
        slow = any(PACKAGED in b.source for b in code)
        name = str(page.relative_to(ROOT))
        if name in OWN_TESTS:
            continue
        params.append(pytest.param(page, id=name, marks=[pytest.mark.slow] if slow else []))
    return params


@functools.cache
def _packaged(name: str):
    return _REAL_LOAD(name)


_REAL_LOAD = interp.load


def _load(name_or_path, *args, **kwargs):
    if name_or_path == PACKAGED and not args and not kwargs:
        return _packaged(name_or_path)
    return _REAL_LOAD(name_or_path, *args, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def _release_the_packaged_model():
    yield
    _packaged.cache_clear()  # the rest of the suite does not keep paying for its memory


@pytest.mark.parametrize("page", _page_params())
def test_the_page_examples_run_as_written(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(interp, "load", _load)
    namespace: dict = {"__name__": "__docs__"}
    for block in runnable_blocks(page):
        if block.language == "console":
            _run_commands(page, block)
            continue
        source = "\n" * block.line + block.source  # so that a traceback names the page's own line
        exec(compile(source, str(page.relative_to(ROOT)), "exec"), namespace)  # noqa: S102 - the page's own example


def _run_commands(page, block) -> None:
    """Each ``$ interp ...`` line of ``block`` through the ``interp`` command, which must succeed."""
    from interp.cli import main

    for command in commands(block):
        argv = shlex.split(command)
        assert argv[0] == "interp", (
            f"{page.relative_to(ROOT)}:{block.line}: {command!r} is not an interp command"
        )
        assert main(argv[1:]) == 0, f"{page.relative_to(ROOT)}:{block.line}: {command!r} failed"


def test_the_readme_and_the_main_pages_have_examples_that_run():
    assert python_blocks(ROOT / "README.md"), "the README's short tour must be executed"
    pages_with_examples = ("hooks", "own-models", "analysis", "sparse-dictionaries", "circuits", "generation")
    for name in (*pages_with_examples, "studies", "reports", "scale"):
        assert python_blocks(ROOT / "docs" / f"{name}.md"), f"docs/{name}.md has no example that runs"


def test_the_pages_run_elsewhere_have_their_own_test():
    for page, test in OWN_TESTS.items():
        assert (ROOT / page).is_file() and python_blocks(ROOT / page), page
        assert (ROOT / test).is_file(), test
        assert page.split("/")[-1] in (ROOT / test).read_text(encoding="utf-8"), (
            f"{test} does not read {page}"
        )


def test_every_example_that_does_not_run_says_why():
    for page in pages():
        for block in blocks(page):
            assert block.not_run != "", f"{page.relative_to(ROOT)}:{block.line}: 'not run:' needs a reason"


def test_links_between_pages_resolve():
    broken = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in pages()
        for target in relative_links(page)
        if target and not (page.parent / target).exists()
    ]
    assert not broken, broken


def test_pages_hold_no_study_findings_that_belong_to_the_study_readmes():
    # measured results of a study live in studies/NAME/README.md only, so that they cannot drift apart
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for figure in ("0.72", "80%", "faithfulness 0.63", "99% [93, 100]", "0.77 of the twin"):
            # the figure as written, not as the start of a longer number (a table's 0.725 is not 0.72)
            found = re.search(rf"(?<![\d.]){re.escape(figure)}(?![\d])", text)
            assert found is None, f"{page.relative_to(ROOT)} repeats the study finding {figure!r}"


def test_the_dashboards_page_opens_with_a_run_that_trains_its_own_transcoders():
    """No transcoders are packaged: the page's first commands train a set, then write its dashboards, and this
    file runs them as written (the page's test above, slow)."""
    first = runnable_blocks(ROOT / "docs" / "dashboards.md")[:2]
    assert [b.language for b in first] == ["python", "console"]
    assert [c.split()[:3] for c in commands(first[1])] == [
        ["interp", "sae", "train"],
        ["interp", "dashboards", "smollm2-135m"],
    ]
    assert "--dictionary tc-run/transcoders" in commands(first[1])[1]
