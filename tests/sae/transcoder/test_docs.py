"""The code blocks of ``docs/transcoders.md`` run as written, and say what the page says they print."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[3] / "docs" / "transcoders.md"


def test_the_transcoders_page_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    assert blocks
    out = io.StringIO()
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope: dict = {}
        with contextlib.redirect_stdout(out):
            for block in blocks:
                exec(compile(block, str(PAGE), "exec"), scope)
    finally:
        os.chdir(here)
    printed = out.getvalue()
    assert "CrossLayerTranscoder [0, 1] 64 topk" in printed
    assert (
        "['blocks.0.hook_mlp_out.hook_sae_acts_post', 'blocks.1.hook_mlp_out.hook_sae_acts_post']" in printed
    )
    assert "CrossLayerTranscoder 0 (8, 16, 64) [0, 1] (64, 50)" in printed
    assert "SAESet 1 (8, 16, 64) [1] (64, 50)" in printed
    assert "[(0, 62), (0, 63), (1, 0), (1, 1)] [0, 1]" in printed
    frame = scope["frame"]
    assert list(frame["layer"]) == [0, 1] and (frame["kl"] > 0).all()
    assert (tmp_path / "run" / "clt" / "config.yaml").is_file()
    assert scope["unchanged"].shape == (8, 16, 50)
