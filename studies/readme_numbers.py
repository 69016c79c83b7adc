"""Every number a study's README reports, checked against the committed results file it came from.

The convention, in the README's Markdown (HTML comments, so a rendered page shows only the numbers):

- ``<!-- results: results/default.json -->`` names the results file (relative to the README, written by
  :mod:`studies.record`) for the text that follows, up to the next such line or ``<!-- /results -->``.
- ``<!--= POINTER -->`` right after a number says where it comes from. The number may be a single value
  (``0.72``, ``+0.52``, ``−0.67``, ``1,349``, ``78%``, ``3.3e-6``) or a value with its interval
  (``0.72 [0.67, 0.77]``) or an interval alone (``[0.67, 0.77]``).
- ``POINTER`` is a path into the file: keys separated by ``/`` (``results/winograd/switch/partial
  scoring/sensitivity``), a list index (``heads/0``), ``[field=value]`` for the first row of a list whose
  ``field`` is ``value`` (``behaviour[method=partial scoring]``; several, ``[d_k=1024][scaled=True]``), and a
  last part ``{a,b,c}`` for several keys of one row (``{accuracy,ci_low,ci_high}``); a key's own ``/`` is
  written ``~1`` (and ``~`` as ``~0``), as in a JSON pointer. A test result (``estimate`` and ``interval.ci``)
  and an interval (``mean`` and ``ci``) stand for their three numbers.

A written number matches when it is the value rounded to the digits written (a percentage is the value times
100). Inside a results region every number with a decimal point must carry a pointer (integers and percentages
may: counts and fractions that are results should); numbers in code spans and blocks are not read.
:func:`check` returns the problems, one line each; ``python -m studies.readme_numbers README...`` prints them.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NUMBER = r"[+\-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+\-]?\d+)?%?"
GROUP = re.compile(rf"(?:({NUMBER})\s*)?(?:\[\s*({NUMBER})\s*,\s*({NUMBER})\s*\])?\s*$")
TAG = re.compile(r"<!--=\s*(.*?)\s*-->")
FILE = re.compile(r"<!--\s*results:\s*(.*?)\s*-->")
END = re.compile(r"<!--\s*/results\s*-->")
DECIMAL = re.compile(rf"(?<![\w.]){NUMBER}(?![\w])")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
ROW = re.compile(r"^([^\[]+)((?:\[[^\]=]+=[^\]]*\])+)$")
CONDITION = re.compile(r"\[([^\]=]+)=([^\]]*)\]")


@dataclass(frozen=True)
class Problem:
    """One number that does not match, or cannot be read: where, and what is wrong."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def resolve(data: Any, pointer: str) -> list[Any]:
    """The values ``pointer`` names in ``data`` (several for a last part ``{a,b}``).

    >>> resolve({"t": [{"m": "x", "a": 1, "b": 2}]}, "t[m=x]/{a,b}")
    [1, 2]
    >>> resolve({"t": [{"d": 4, "s": False, "a": 1}, {"d": 4, "s": True, "a": 2}]}, "t[d=4][s=True]/a")
    [2]

    Raises:
        KeyError: a part of the pointer is not there (the message says which).
    """
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.strip("/").split("/") if p]
    if parts and parts[-1].startswith("{") and parts[-1].endswith("}"):
        return [_walk(data, [*parts[:-1], k.strip()]) for k in parts[-1][1:-1].split(",")]
    return [_walk(data, parts)]


def _walk(data: Any, parts: list[str]) -> Any:
    node = data
    for i, part in enumerate(parts):
        where = "/".join(parts[: i + 1])
        row = ROW.match(part)
        if row is not None:
            rows = _step(node, row.group(1), where)
            conditions = CONDITION.findall(row.group(2))
            found = [
                r for r in rows if isinstance(r, dict) and all(str(r.get(f)) == v for f, v in conditions)
            ]
            if not found:
                raise KeyError(f"{where}: no row with {' and '.join(f'{f} = {v!r}' for f, v in conditions)}")
            node = found[0]
        else:
            node = _step(node, part, where)
    return node


def _step(node: Any, part: str, where: str) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    keys = (
        list(node)[:12]
        if isinstance(node, dict)
        else f"a list of {len(node)}"
        if isinstance(node, list)
        else node
    )
    raise KeyError(f"{where}: not found (there: {keys})")


def numbers(values: list[Any]) -> list[float]:
    """The numbers the values stand for: a test result's estimate and interval, an interval's mean and ends,
    a list's members (an unbounded end, written as ``"inf"``, is infinite; ``None`` is NaN)."""
    out: list[float] = []
    for v in values:
        if isinstance(v, dict) and "estimate" in v and isinstance(v.get("interval"), dict):
            out += numbers([v["estimate"], *v["interval"]["ci"]])
        elif isinstance(v, dict) and "mean" in v and "ci" in v:
            out += numbers([v["mean"], *v["ci"]])
        elif isinstance(v, list):
            out += numbers(v)
        elif isinstance(v, bool):
            out.append(float(v))
        elif isinstance(v, (int, float)):
            out.append(float(v))
        elif v is None:
            out.append(math.nan)
        elif v in ("inf", "-inf"):
            out.append(float(v))
        else:
            raise TypeError(f"{v!r} is not a number")
    return out


def _parse(text: str) -> tuple[float, int, bool]:
    """A written number: its value, the power of ten of its last digit, whether it is a percentage."""
    percent = text.endswith("%")
    body = text.rstrip("%").replace("−", "-").replace(",", "")
    mantissa, _, exponent = body.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return float(body), int(exponent or 0) - decimals, percent


def matches(written: str, value: float, percent: bool) -> bool:
    """Whether ``written`` is ``value`` (times 100 for a percentage) rounded to the digits written.

    >>> matches("0.72", 0.7249, False), matches("0.72", 0.7251, False), matches("78%", 0.7812, True)
    (True, False, True)
    """
    number, power, _ = _parse(written)
    if percent:
        value = 100 * value
    if math.isnan(value):
        return False
    if math.isinf(value):
        return False
    return abs(number - value) <= 0.5 * 10.0**power * (1 + 1e-9) + 1e-12


def check(readme: Path | str) -> list[Problem]:
    """Every tagged number of ``readme`` against its results file, and every untagged decimal number inside a
    results region; an empty list when all agree."""
    readme = Path(readme)
    text = readme.read_text()
    blanked = CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)  # code is not read, lines are kept
    problems: list[Problem] = []
    events = sorted(
        [(m.start(), "file", m) for m in FILE.finditer(blanked)]
        + [(m.start(), "end", m) for m in END.finditer(blanked)]
        + [(m.start(), "tag", m) for m in TAG.finditer(blanked)]
    )
    data, covered, regions, start = None, [], [], None
    for position, kind, m in events:
        line = blanked.count("\n", 0, position) + 1
        if kind == "file":
            if start is not None:
                regions.append((start, position))
            start = m.end()
            path = readme.parent / m.group(1)
            if not path.is_file():
                problems.append(Problem(readme, line, f"results file {m.group(1)!r} is not there"))
                data = None
                continue
            data = json.loads(path.read_text())
        elif kind == "end":
            if start is not None:
                regions.append((start, position))
            start, data = None, None
        else:
            problems += _check_tag(readme, line, blanked, m, data, covered)
    if start is not None:
        regions.append((start, len(blanked)))
    for begin, end in regions:
        for m in DECIMAL.finditer(blanked, begin, end):
            if "." in m.group() and not any(a <= m.start() and m.end() <= b for a, b in covered):
                if _in_comment(blanked, m.start()):
                    continue
                line = blanked.count("\n", 0, m.start()) + 1
                problems.append(
                    Problem(readme, line, f"{m.group()} has no <!--= POINTER --> saying where it is from")
                )
    return problems


def _in_comment(text: str, position: int) -> bool:
    opened = text.rfind("<!--", 0, position)
    return opened != -1 and text.find("-->", opened) > position


def _check_tag(readme: Path, line: int, text: str, m: re.Match, data: Any, covered: list) -> list[Problem]:
    pointer = m.group(1)
    if data is None:
        return [Problem(readme, line, f"<!--= {pointer} --> comes before any <!-- results: FILE --> line")]
    before = text[max(0, m.start() - 120) : m.start()]
    group = GROUP.search(before)
    written = [g for g in (group.groups() if group else ()) if g]
    if not written:
        return [Problem(readme, line, f"<!--= {pointer} --> follows no number")]
    covered.append((m.start() - (len(before) - group.start()), m.start()))
    try:
        values = numbers(resolve(data, pointer))
    except (KeyError, TypeError) as err:
        return [Problem(readme, line, f"<!--= {pointer} -->: {err.args[0]}")]
    has_value, has_interval = group.group(1) is not None, group.group(2) is not None
    if has_interval and not has_value:
        values = values[-2:]
    elif has_value and not has_interval:
        values = values[:1]
    if len(values) != len(written):
        return [
            Problem(readme, line, f"{' '.join(written)}: <!--= {pointer} --> holds {len(values)} numbers")
        ]
    percent = written[0].endswith("%")
    wrong = [
        f"{w} (the file: {v:.6g})" for w, v in zip(written, values, strict=True) if not matches(w, v, percent)
    ]
    return [Problem(readme, line, f"{', '.join(wrong)} at {pointer}")] if wrong else []


def main(argv: Sequence[str] | None = None) -> int:
    paths = list(argv if argv is not None else sys.argv[1:])
    if not paths:
        paths = [str(p) for p in sorted(Path(__file__).resolve().parent.glob("*/README.md"))]
    problems = [p for path in paths for p in check(path)]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
