"""Attention pictures from a given pattern (circuitsvis's attention_heads / attention_pattern, offline)."""

from __future__ import annotations

import re

import pytest
import torch

import interp.compat.circuitsvis as cv
from interp.report.patterns import attention_heads


def test_every_weight_is_a_cell_with_its_value():
    pattern = torch.tensor([[[1.0, 0.0], [0.25, 0.75]], [[1.0, 0.0], [0.5, 0.5]]])
    view = cv.attention.attention_heads(tokens=["<b>", " cat"], attention=pattern)
    cells = re.findall(r"<td style='background:rgba\(31,111,235,([0-9.]+)\)' title='([^']*)'>", view.html)
    assert len(cells) == 8
    assert [float(alpha) for alpha, _ in cells[:4]] == [1.0, 0.0, 0.25, 0.75]
    assert cells[3][1] == " cat \u2192  cat: 0.750"
    assert (
        "&lt;b&gt;" in view.html and "<b>" not in view.html.replace("<b>", "", 0)[view.html.index("<div") :]
    )
    assert view.html.count("<figcaption>") == 2 and "Head 1" in view.html
    assert "<script" not in view.html and "http" not in view.html
    assert view._repr_html_() == view.html


def test_one_head_and_names():
    view = cv.attention.attention_pattern(tokens=["a", "b", "c"], attention=torch.eye(3))
    assert view.html.count("<td") == 9
    named = attention_heads(["a", "b"], torch.ones(2, 2, 2) / 2, head_names=["L0H0", "L0H1"])
    assert "L0H1" in named.html


def test_mismatched_tokens_say_what_to_pass():
    with pytest.raises(ValueError, match="one token per key position"):
        cv.attention.attention_heads(tokens=["a"], attention=torch.ones(1, 2, 2))
    with pytest.raises(ValueError, match="one name per head"):
        attention_heads(["a", "b"], torch.ones(2, 2, 2), ["only one"])


def test_save_writes_a_page(tmp_path):
    path = cv.attention.attention_pattern(["a", "b"], torch.tensor([[1.0, 0.0], [0.5, 0.5]])).save(
        tmp_path / "p.html"
    )
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")
