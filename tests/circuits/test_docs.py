"""The runnable example of ``docs/attribution-graphs.md`` runs and its assertions hold."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "attribution-graphs.md"


def test_page_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert blocks, f"{PAGE} has no python example"
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}  # the page reads top to bottom: later examples use earlier names
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    assert (tmp_path / "graph-folder" / "index.html").is_file()
