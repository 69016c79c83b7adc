"""The examples of ``docs/commands.md`` run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "commands.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_page_has_examples():
    assert len(BLOCKS) == 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_python_example_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the examples write under reports/
    exec(compile(BLOCKS[index], f"{PAGE.name} example {index + 1}", "exec"), {})
    said = capsys.readouterr().err.splitlines()
    shown = re.findall(r"^# (interp.*error: .*)$", BLOCKS[index], flags=re.MULTILINE)
    assert said == shown  # the page quotes each message as the command prints it
