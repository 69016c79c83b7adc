"""Turning study outputs into deterministic JSON.

A report's ``results.json`` must be byte-identical across two runs with the same seed, so every value passes
through :func:`to_jsonable` first: floats are rounded to a fixed number of significant digits (float noise
below that does not change the file), non-finite floats become ``null``, numpy and torch scalars and arrays
become plain Python values, and keys are sorted when dumped. The same conversion feeds
:func:`json_for_script`, the only way data enters a ``<script>`` element of a report, which also escapes the
characters that could end the element.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

SIGNIFICANT_DIGITS = 6
"""Significant digits kept for every float written to a report."""

# Characters that could close a <script> element, open a comment, or end a JavaScript string literal.
_SCRIPT_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def round_float(value: float, digits: int = SIGNIFICANT_DIGITS) -> float | None:
    """Round to ``digits`` significant digits; NaN and infinities become ``None``.

    >>> round_float(3.14159265), round_float(float("nan")), round_float(-0.0)
    (3.14159, None, 0.0)
    """
    value = float(value)
    if not math.isfinite(value):
        return None
    rounded = float(format(value, f".{digits}g"))
    return 0.0 if rounded == 0 else rounded  # normalise -0.0


def to_jsonable(obj: Any, *, digits: int = SIGNIFICANT_DIGITS, _path: str = "value") -> Any:
    """Convert ``obj`` to plain JSON types, rounding floats.

    Accepts ``None``, bools, ints, floats, strings, mappings with string or integer keys, lists, tuples,
    sets of sortable values, dataclasses, paths, and anything with a ``tolist()`` method (numpy and torch
    scalars and arrays).

    Args:
        obj: The value to convert.
        digits: Significant digits kept for floats.

    Returns:
        A value made of dicts, lists, strings, ints, finite floats, bools and ``None``.

    Raises:
        TypeError: If some part of ``obj`` has no JSON form; the message names where it is.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return round_float(obj, digits)
    if isinstance(obj, Mapping):
        return {
            _key(k, _path): to_jsonable(v, digits=digits, _path=f"{_path}[{k!r}]") for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, digits=digits, _path=f"{_path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)):
        try:
            items = sorted(obj)
        except TypeError as err:
            raise TypeError(
                f"{_path}: a set must hold sortable values to be written in a fixed order"
            ) from err
        return [to_jsonable(v, digits=digits, _path=f"{_path}[{i}]") for i, v in enumerate(items)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return to_jsonable(fields, digits=digits, _path=_path)
    if isinstance(obj, PurePath):
        return str(obj)
    if type(obj).__name__ == "DataFrame":
        raise TypeError(f"{_path}: a DataFrame is not a result; add it with Report.add_table instead")
    if hasattr(obj, "tolist"):  # numpy and torch scalars and arrays
        if hasattr(obj, "detach"):  # torch: leave the graph and the device, widen bfloat16
            obj = obj.detach().cpu()
            if obj.is_floating_point():
                obj = obj.double()
        return to_jsonable(obj.tolist(), digits=digits, _path=_path)
    raise TypeError(f"{_path}: cannot write a {type(obj).__module__}.{type(obj).__qualname__} as JSON")


def table_records(frame: Any) -> list[dict]:
    """A DataFrame's rows as result records (one dict per row), missing values as ``None``.

    >>> import pandas as pd
    >>> table_records(pd.DataFrame({"head": [1, 2], "score": [0.5, float("nan")]}))
    [{'head': 1, 'score': 0.5}, {'head': 2, 'score': None}]
    """
    return frame.replace({math.nan: None}).to_dict(orient="records")


def _key(key: Any, path: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, int) or (hasattr(key, "dtype") and getattr(key, "ndim", None) == 0):
        return str(int(key))
    raise TypeError(f"{path}: JSON keys must be strings or integers, got {type(key).__name__} {key!r}")


def dumps_deterministic(obj: Any, *, digits: int = SIGNIFICANT_DIGITS) -> str:
    """Serialise ``obj`` to JSON text that is the same for the same values: sorted keys, rounded floats.

    >>> dumps_deterministic({"b": 1 / 3, "a": [float("inf")]})
    '{\\n  "a": [\\n    null\\n  ],\\n  "b": 0.333333\\n}\\n'
    """
    return json.dumps(to_jsonable(obj, digits=digits), sort_keys=True, indent=2, allow_nan=False) + "\n"


def json_for_script(obj: Any, *, digits: int = SIGNIFICANT_DIGITS) -> str:
    """JSON text that is safe to place inside a ``<script>`` element.

    ``<``, ``>`` and ``&`` become ``\\u003c``, ``\\u003e`` and ``\\u0026``, so no string (a token, a line
    of a data file) can close the element with ``</script>`` or open an HTML comment; U+2028 and U+2029 are
    escaped as well.
    The result parses to the same value with ``JSON.parse`` and is also a valid JavaScript expression.

    >>> json_for_script({"tok": "</script>"})
    '{"tok": "\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(to_jsonable(obj, digits=digits), sort_keys=True, allow_nan=False, ensure_ascii=False)
    return text.translate(_SCRIPT_ESCAPES)
