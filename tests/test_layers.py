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


def test_a_module_outside_every_layer_is_reported(tmp_path):
    (tmp_path / "interp").mkdir()
    (tmp_path / "interp" / "__init__.py").write_text("")
    (tmp_path / "interp" / "utils.py").write_text("")
    layers = [(name, prefixes) for name, prefixes in import_rules.LAYERS if name != "package root"]

    assert import_rules.layer_violations(tmp_path, layers, packages=("interp",)) == [
        "interp/__init__.py is in no layer; add its package to LAYERS",
        "interp/utils.py is in no layer; add its package to LAYERS",
    ]


def test_a_planted_import_of_one_study_by_another_is_named(tmp_path):
    line = _plant(tmp_path, "studies/steering/measure.py", "from studies.coreference import causal")

    assert import_rules.study_crossings(tmp_path) == [
        f"studies/steering/measure.py:{line} imports studies.coreference.causal (studies/coreference/causal.py): "
        "a study imports another study; share it through studies/data/"
    ]
