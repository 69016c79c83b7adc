"""The example on docs/devices.md runs and its assertions hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.load.builders import needs_smollm

PAGE = Path(__file__).resolve().parents[1] / "docs" / "devices.md"
pytest.importorskip("accelerate")


def python_blocks(text: str) -> list[str]:
    """The page's fenced ``python`` code blocks, in order."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.slow
@needs_smollm
def test_the_devices_page_example_runs(capsys):
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 1
    exec(compile(blocks[0], str(PAGE), "exec"), {"__name__": "devices_page"})
    assert capsys.readouterr().out.strip()  # the generated text was printed
