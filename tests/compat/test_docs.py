"""The example of docs/transformer-lens.md runs, on the tiny golden checkpoint instead of SmolLM2."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from tests.compat.models import CHECKPOINT

PAGE = Path(__file__).parents[2] / "docs" / "transformer-lens.md"


def test_the_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) == 2 and "MODEL" in blocks[1]
    with torch.no_grad():
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), {"MODEL": CHECKPOINT})
