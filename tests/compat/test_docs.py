"""The examples of docs/transformer-lens.md and docs/sae-lens.md run, on the tiny golden checkpoint (and the SAEs
SAELens wrote for the tests) instead of SmolLM2."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from tests.compat.models import CHECKPOINT, GOLDEN

DOCS = Path(__file__).parents[2] / "docs"


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_transformer_lens_example_runs():
    page = DOCS / "transformer-lens.md"
    blocks = _blocks(page)
    assert len(blocks) == 2 and "MODEL" in blocks[1]
    with torch.no_grad():
        for block in blocks:
            exec(compile(block, str(page), "exec"), {"MODEL": CHECKPOINT})


def test_the_sae_lens_example_runs(capsys):
    page = DOCS / "sae-lens.md"
    blocks = _blocks(page)
    assert len(blocks) == 2 and "RELEASE" in blocks[1]
    names = {
        "MODEL": CHECKPOINT,
        "RELEASE": str(GOLDEN / "saes"),
        "SAE_ID": "standard",
        "__name__": "__docs__",
    }
    with torch.no_grad():
        for block in blocks:
            exec(compile(block, str(page), "exec"), names)
    printed = capsys.readouterr().out
    assert "ablated moves the last logits by up to" in printed
    assert float(printed.rsplit("up to ", 1)[1]) > 0  # the edit shows through the error term
