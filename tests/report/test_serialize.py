"""Deterministic JSON: rounding, type conversion, and JSON that cannot break out of a script element."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from interp.report import dumps_deterministic, json_for_script, to_jsonable
from interp.report.serialize import round_float


def test_round_float_keeps_six_significant_digits_and_nulls_non_finite():
    assert round_float(1 / 3) == 0.333333
    assert round_float(123456789.0) == 123457000.0
    assert round_float(-1.23456789e-9) == -1.23457e-9
    assert round_float(-0.0) == 0.0 and str(round_float(-0.0)) == "0.0"
    assert round_float(float("nan")) is None
    assert round_float(float("inf")) is None and round_float(float("-inf")) is None


def test_to_jsonable_converts_numpy_and_torch():
    value = {
        "i": np.int64(7),
        "f": np.float32(0.1),
        "b": np.bool_(True),
        "arr": np.array([[1.0, np.nan], [np.inf, 2.5]]),
        "t": torch.tensor([0.5, 1 / 3], dtype=torch.bfloat16),
        "t0": torch.tensor(3),
        "tup": (1, 2.0),
        "set": {3, 1, 2},
        "path": Path("a/b"),
        5: "int key",
    }
    out = to_jsonable(value)
    assert out == {
        "i": 7,
        "f": 0.1,
        "b": True,
        "arr": [[1.0, None], [None, 2.5]],
        "t": [0.5, 0.333984],
        "t0": 3,
        "tup": [1, 2.0],
        "set": [1, 2, 3],
        "path": "a/b",
        "5": "int key",
    }
    assert type(out["i"]) is int and type(out["b"]) is bool and type(out["f"]) is float


def test_to_jsonable_converts_dataclasses():
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        n_layers: int = 2
        eps: float = 1e-5

    assert to_jsonable(Cfg()) == {"n_layers": 2, "eps": 1e-5}


def test_to_jsonable_names_the_bad_value():
    with pytest.raises(TypeError, match=r"value\['a'\]\[1\]: cannot write a builtins.object"):
        to_jsonable({"a": [1, object()]})
    with pytest.raises(TypeError, match="JSON keys must be strings or integers"):
        to_jsonable({(1, 2): 3})
    with pytest.raises(TypeError, match="add it with Report.add_table"):
        import pandas as pd

        to_jsonable({"df": pd.DataFrame({"a": [1]})})


def test_dumps_deterministic_sorts_keys_and_is_stable_under_float_noise():
    a = dumps_deterministic({"b": 0.1 + 0.2, "a": [1, float("nan")]})
    b = dumps_deterministic({"a": [1, float("nan")], "b": 0.3 + 1e-12})
    assert a == b
    assert a.index('"a"') < a.index('"b"')
    assert json.loads(a) == {"a": [1, None], "b": 0.3}


@pytest.mark.parametrize(
    "text",
    ["</script><script>alert(1)</script>", "<!--", "a & b > c", "line\u2028sep\u2029para", "quote \" ' \\"],
)
def test_json_for_script_escapes_and_round_trips(text):
    encoded = json_for_script({"s": text, "n": [1.5, None]})
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in encoded
    assert json.loads(encoded) == {"s": text, "n": [1.5, None]}


def test_json_for_script_keeps_unicode_readable():
    assert json_for_script(["Ġthe", "日本"]) == '["Ġthe", "日本"]'
