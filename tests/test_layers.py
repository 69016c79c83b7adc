"""The import rules of the design page hold, and the checker finds a planted break of each kind."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests import import_rules

ROOT = Path(__file__).resolve().parents[1]


def test_no_import_points_up_the_layers():
    assert import_rules.layer_violations(ROOT) == []


def test_no_study_imports_another():
    assert import_rules.study_crossings(ROOT) == []


def test_no_import_closes_a_circle():
    assert import_rules.circles(ROOT) == []


def _plant(tmp_path: Path, module: str, statement: str) -> int:
    """Copy the sources to ``tmp_path`` and add ``statement`` inside a function of ``module``; its line."""
    for package in import_rules.PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n\ndef _planted():\n    {statement}\n")
    return path.read_text().count("\n")


def test_a_planted_upward_import_inside_a_function_is_named_with_both_files(tmp_path):
    line = _plant(tmp_path, "interp/model/block.py", "from interp.analysis import patching")

    assert import_rules.layer_violations(tmp_path) == [
        f"interp/model/block.py:{line} imports interp.analysis.patching (interp/analysis/patching.py): "
        "layer 'model' may not import 'analysis' above it"
    ]


def test_a_planted_import_of_hooks_into_interp_and_a_literal_import_module_are_both_read(tmp_path):
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "__init__.py").write_text("")
    (tmp_path / "hooks" / "point.py").write_text(
        "import importlib\nimportlib.import_module('interp.config')\n"
    )
    (tmp_path / "interp").mkdir()
    (tmp_path / "interp" / "__init__.py").write_text("")
    (tmp_path / "interp" / "config.py").write_text("from hooks import point\n")

    assert import_rules.layer_violations(tmp_path, packages=("interp", "hooks")) == [
        "hooks/point.py:2 imports interp.config (interp/config.py): layer 'hooks' may not import 'helpers' above it"
    ]
    assert import_rules.circles(tmp_path, packages=("interp", "hooks")) == [
        ["hooks/point.py", "interp/config.py", "hooks/point.py"]
    ]


def test_a_planted_circle_through_a_relative_import_is_named(tmp_path):
    package = tmp_path / "interp" / "store"
    package.mkdir(parents=True)
    (tmp_path / "interp" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "reader.py").write_text("from .writer import write\n\ndef read():\n    pass\n")
    (package / "writer.py").write_text("def write():\n    from interp.store.reader import read\n")

    assert import_rules.layer_violations(tmp_path, packages=("interp",)) == []
    assert import_rules.circles(tmp_path, packages=("interp",)) == [
        ["interp/store/reader.py", "interp/store/writer.py", "interp/store/reader.py"]
    ]


def test_every_import_module_names_its_module_in_the_source():
    assert import_rules.unread_imports(ROOT) == []


def test_a_module_planted_in_no_layer_is_reported_and_the_tree_has_none(tmp_path):
    _plant(tmp_path, "interp/config.py", "pass")
    (tmp_path / "interp" / "text_utils.py").write_text("")
    (tmp_path / "interp" / "plugins").mkdir()
    (tmp_path / "interp" / "plugins" / "__init__.py").write_text("")
    (tmp_path / "interp" / "plugins" / "loader.py").write_text("")
    (tmp_path / "interp" / "sae" / "new_format.py").write_text("")  # in a placed package: placed

    assert import_rules.layer_violations(tmp_path) == [
        f"{name} is in no layer; place it in docs/architecture.md and LAYERS"
        for name in ("interp/plugins/__init__.py", "interp/plugins/loader.py", "interp/text_utils.py")
    ]
    assert import_rules.layer_of("interp") == import_rules.layer_of("interp.__main__")
    assert import_rules.layer_of("interp.cli") is not None and import_rules.layer_of("interp.clip") is None


def test_an_f_string_import_module_reaches_every_module_of_its_package_and_others_are_reported(tmp_path):
    package = tmp_path / "interp" / "store"
    package.mkdir(parents=True)
    (tmp_path / "interp" / "__init__.py").write_text("")
    (package / "__init__.py").write_text(
        "import importlib\n\ndef part(name):\n    return importlib.import_module(f'{__name__}.{name}')\n"
    )
    (package / "reader.py").write_text("")
    (package / "writer.py").write_text("")
    (tmp_path / "interp" / "config.py").write_text(
        "from importlib import import_module\nimport_module(f'interp.{\"tokens\"}')\n"
    )
    (tmp_path / "interp" / "tokens.py").write_text(
        "import importlib\nname = 'interp.config'\nimportlib.import_module(name)\n"
    )

    assert sorted((i.source, i.target) for i in import_rules.imports(tmp_path, packages=("interp",))) == [
        ("interp.config", "interp.store"),
        ("interp.config", "interp.tokens"),
        ("interp.store", "interp.store.reader"),
        ("interp.store", "interp.store.writer"),
    ]
    assert import_rules.layer_violations(tmp_path, packages=("interp",)) == [
        "interp/config.py:2 imports interp.store (interp/store/__init__.py): "
        "layer 'helpers' may not import 'store' above it"
    ]
    assert import_rules.unread_imports(tmp_path, packages=("interp",)) == [
        "interp/tokens.py:3 imports a module named at run time; name it in the source, or list the module in "
        "RUN_TIME_IMPORTS with what it imports"
    ]


def test_a_planted_import_of_one_study_by_another_is_named(tmp_path):
    line = _plant(tmp_path, "studies/steering/measure.py", "from studies.coreference import causal")

    assert import_rules.study_crossings(tmp_path) == [
        f"studies/steering/measure.py:{line} imports studies.coreference.causal (studies/coreference/causal.py): "
        "a study imports another study; share it through studies/data/"
    ]


def test_benchmarks_and_scripts_are_read_with_their_sibling_imports_and_a_circle_among_them_is_named(
    tmp_path,
):
    """Scripts run as files import the modules beside them by bare name (their folder is first on sys.path)."""
    (tmp_path / "interp").mkdir()
    (tmp_path / "interp" / "__init__.py").write_text("")
    (tmp_path / "interp" / "config.py").write_text("def run():\n    from benchmarks import timing\n")
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "provenance.py").write_text("import torch\n")
    (bench / "timing.py").write_text("import provenance\nfrom benchmarks.peer import tokens\n")
    (bench / "peer.py").write_text("def tokens():\n    from benchmarks.timing import provenance\n")
    packages = ("interp", "benchmarks")

    assert sorted((i.source, i.target) for i in import_rules.imports(tmp_path, packages)) == [
        ("benchmarks.peer", "benchmarks.timing"),
        ("benchmarks.timing", "benchmarks.peer"),
        ("benchmarks.timing", "benchmarks.provenance"),
        ("interp.config", "benchmarks.timing"),
    ]
    assert import_rules.circles(tmp_path, packages) == [
        ["benchmarks/peer.py", "benchmarks/timing.py", "benchmarks/peer.py"]
    ]
    assert import_rules.layer_violations(tmp_path, packages=packages) == [
        "interp/config.py:2 imports benchmarks.timing (benchmarks/timing.py): layer 'helpers' may not import "
        "'benchmarks' above it"
    ]
