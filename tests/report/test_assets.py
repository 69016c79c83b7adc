"""Page assets are package data files; the pages built from them keep their bytes; imports point one way."""

from __future__ import annotations

import ast
import hashlib
import re
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest

from interp.report.assets import fill, read_asset
from interp.report.explainer_page import render_explainer
from interp.report.page import render_page
from tests.report.pages import explainer_data, report_page_inputs

ROOT = Path(__file__).resolve().parents[2]

# sha256 of the pages built from the fixed inputs in tests/report/pages.py, last set when every page moved into
# the one page shell (shell.html with dom.js) and its scripts to ES2020. A change to an asset or a renderer
# changes these on purpose only: rebuild the page, look at it, and update the hash in the same commit.
EXPLAINER_SHA256 = "01a88f7470b78f38ec11f1a855942cfc61f17cac7282e993c77e7cabb3692fb8"
REPORT_PAGE_SHA256 = "b58f4f967ae29144d29f3b503c2abd4a558a8031d87c4f7ba3f8577f79cf6c5d"


def test_explainer_page_bytes_are_pinned():
    page = render_explainer(explainer_data())
    assert hashlib.sha256(page.encode("utf-8")).hexdigest() == EXPLAINER_SHA256
    assert render_explainer(explainer_data()) == page


def test_report_page_bytes_are_pinned():
    page = render_page(**report_page_inputs())
    assert hashlib.sha256(page.encode("utf-8")).hexdigest() == REPORT_PAGE_SHA256


def test_every_asset_is_declared_as_package_data_and_read_through_resources():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["interp.report.assets"]
    files = [p for p in resources.files("interp.report.assets").iterdir() if p.name != "__init__.py"]
    names = sorted(p.name for p in files if not p.name.startswith("__"))
    assert names == [
        "dom.js",
        "explainer.css",
        "explainer.html",
        "explainer.js",
        "feature_id.js",
        "patterns.css",
        "report.css",
        "report.js",
        "shell.html",
        "svg.js",
    ]
    for name in names:
        assert any(fnmatch(name, pattern) for pattern in patterns), name
        assert read_asset(name) == (ROOT / "interp" / "report" / "assets" / name).read_text(encoding="utf-8")
    with pytest.raises(
        FileNotFoundError, match=r"no page asset 'nope.js' in interp.report.assets.*'explainer.js'"
    ):
        read_asset("nope.js")
    with pytest.raises(FileNotFoundError, match=r"'nope.js' in interp.sae.dashboards.assets.*'page.js'"):
        read_asset("nope.js", "interp.sae.dashboards.assets")


def test_fill_replaces_each_mark_once_and_checks_the_names():
    assert fill("<p>{{a}} {{b}} {{a}}</p>", {"a": "{{b}}", "b": "x"}) == "<p>{{b}} x {{b}}</p>"
    with pytest.raises(KeyError, match=r"missing \['b'\]"):
        fill("{{a}}{{b}}", {"a": ""})
    with pytest.raises(KeyError, match=r"not in the template \['c'\]"):
        fill("{{a}}", {"a": "", "c": ""})


def test_template_marks_are_exactly_what_the_renderers_fill():
    shell, body = read_asset("shell.html"), read_asset("explainer.html")
    for template, marks in ((shell, ("csp", "title", "css", "body", "scripts")), (body, ("model", "text"))):
        assert sorted(re.findall(r"\{\{(\w+)\}\}", template)) == sorted(marks)
    assert "<head" not in body and "<script" not in body  # the shell writes them
    assert "<script" not in read_asset("explainer.js") and "</style" not in read_asset("explainer.css")


def _report_imports() -> dict[str, set[str]]:
    """Module -> the ``interp.report`` modules it imports (at any depth of the file, lazy imports too)."""
    package = ROOT / "interp" / "report"
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("interp.report"):
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("interp.report")}
        graph[module] = found - {module}
    return graph


def test_report_modules_import_one_way():
    graph = _report_imports()
    assert "interp.report.attention_view" not in graph["interp.report.explain"]
    assert "interp.report.explain" in graph["interp.report.attention_view"]
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for dep in sorted(graph.get(module, ())):
            if dep == "interp.report":
                continue  # the package itself re-exports; submodules never import it
            assert state.get(dep) != "open", f"import cycle: {' -> '.join([*path, dep])}"
            if dep not in state:
                visit(dep, [*path, dep])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not any(
        "interp.report" == dep for m, deps in graph.items() if m != "interp.report" for dep in deps
    )
