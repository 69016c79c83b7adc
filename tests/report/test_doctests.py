"""The examples in the report modules' docstrings run and give what they show."""

import doctest
import importlib

import pytest

MODULES = ["interp.report", "interp.report.serialize", "interp.report.text", "interp.report.writer"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
