"""A study's numbers as a small committed file: ``studies/NAME/results/RUN.json``, what its README cites.

A report folder holds everything a run measured (``results.json``) and how it ran (``manifest.json``); neither is
committed, and ``results.json`` can run to megabytes (every item's record). This module keeps what a reader of
the README needs: the run's command (report and cache folders written ``DIR`` and ``CACHE``, other absolute paths
``PATH``, so that no machine's paths enter the repository), the commit it ran at and whether the tree had
uncommitted changes, the model (name, description, SHA-256), the seed, device, dtype and wall time, and the
report's ``headline`` and ``results`` with long lists left out (:data:`MAX_LIST`): per-item records and
per-layer arrays stay in the report. The README's numbers are then checked against this file
(:mod:`studies.readme_numbers`).

    interp study coreference --out reports/coreference
    python -m studies.record coreference reports/coreference             # studies/coreference/results/default.json
    python -m studies.record attribution reports/attribution --as small  # .../results/small.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interp.atomic import write_atomic

ROOT = Path(__file__).resolve().parent
MAX_LIST = 200
"""Lists longer than this (per-item records, long tables), and arrays of more numbers, are left out of the file;
a summary table (a faithfulness curve, a row per head of a small model, a row per layer, scale and control)
stays."""
MAX_BYTES = 400_000
"""A results file larger than this is refused: the numbers a README cites fit in far less."""
PLACEHOLDERS = {"--out": "DIR", "--work": "CACHE"}
"""Flags whose values are this machine's folders, and what the recorded command writes instead."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def command_of(command: Sequence[str]) -> str:
    """The manifest's command as one line with no machine paths: the report and cache folders as ``DIR`` and
    ``CACHE``, any other absolute path as ``PATH``.

    >>> command_of(["/venv/bin/interp", "study", "qk", "--out", "/tmp/qk", "--data", "/home/w.jsonl", "--top", "8"])
    'interp study qk --out DIR --data PATH --top 8'
    """
    out, hide = [], None
    command = [Path(command[0]).name, *command[1:]] if command else []  # the program, not where it is
    for arg in command:
        flag, eq, value = arg.partition("=")
        if hide is not None:
            out.append(hide)
            hide = None
        elif eq and flag in PLACEHOLDERS:
            out.append(f"{flag}={PLACEHOLDERS[flag]}")
        elif arg in PLACEHOLDERS:
            out.append(arg)
            hide = PLACEHOLDERS[arg]
        else:
            out.append("PATH" if arg.startswith("/") else arg)
    return " ".join(out)


def pruned(value: Any, where: str = "") -> Any:
    """``value`` with every list longer than :data:`MAX_LIST` left out (a dict drops the key, a list keeps its
    short members), and no string that is an absolute path (refused, naming where it is)."""
    if isinstance(value, dict):
        out = {}
        for key, member in value.items():
            if _long(member):
                continue
            out[key] = pruned(member, f"{where}/{key}")
        return out
    if isinstance(value, list):
        return [pruned(member, f"{where}/{i}") for i, member in enumerate(value) if not _long(member)]
    if isinstance(value, str) and value.startswith("/"):
        raise ValueError(
            f"{where or 'the value'} holds the absolute path {value!r}; a committed results file names no "
            "machine's paths: leave it out of the report's results, or record a relative one"
        )
    return value


def _long(value: Any) -> bool:
    """A list of more than :data:`MAX_LIST` members, or an array (lists in a list) of more numbers than that."""
    if not isinstance(value, list):
        return False
    if len(value) > MAX_LIST:
        return True
    return any(isinstance(x, list) for x in value) and _leaves(value) > MAX_LIST


def _leaves(value: Any) -> int:
    return sum(_leaves(x) for x in value) if isinstance(value, list) else 1


def results_file(report: Path | str) -> dict[str, Any]:
    """The committed file's contents for the report folder ``report`` (see the module's description).

    Raises:
        ValueError: the folder holds no report, or the report names a machine path in its results.
    """
    report = Path(report)
    missing = [n for n in ("manifest.json", "results.json") if not (report / n).is_file()]
    if missing:
        raise ValueError(
            f"{report} holds no {' or '.join(missing)}; give the folder a study wrote with --out"
        )
    manifest = json.loads((report / "manifest.json").read_text())
    results = json.loads((report / "results.json").read_text())
    model = manifest.get("model") or {}
    source = manifest.get("source") or {}
    return {
        "command": command_of(manifest["command"]),
        "commit": source.get("commit"),
        "dirty": source.get("dirty"),
        "model": {k: model[k] for k in ("name", "description", "sha256") if k in model} or None,
        "seed": manifest.get("seed"),
        "device": manifest.get("device"),
        "dtype": manifest.get("dtype"),
        "wall_time_s": manifest.get("wall_time_s"),
        "headline": pruned(results.get("headline", {}), "/headline"),
        "results": pruned(results.get("results", {}), "/results"),
    }


def record(study: str, report: Path | str, name: str = "default", root: Path = ROOT) -> Path:
    """Write ``root/STUDY/results/NAME.json`` from the report folder ``report``; returns its path.

    Raises:
        ValueError: ``study`` is not a study folder under ``root``, ``name`` is not a plain file stem, the
            report is another study's, or the file would be larger than :data:`MAX_BYTES`.
    """
    if not (root / study / "__init__.py").is_file():
        known = sorted(p.name for p in root.iterdir() if (p / "study.py").is_file())
        raise ValueError(f"{study!r} is not a study; one of {', '.join(known)}")
    if not NAME.match(name):
        raise ValueError(f"--as {name!r}: use letters, digits, '_' and '-', such as 'default' or 'small'")
    found = results_file(report)
    words = found["command"].split()
    if study not in words[:3] and f"studies.{study}.study" not in found["command"]:
        raise ValueError(f"{report} was written by {found['command']!r}, not by the {study} study")
    text = json.dumps({"study": study, **found}, indent=1, sort_keys=True, allow_nan=False) + "\n"
    if len(text.encode()) > MAX_BYTES:
        raise ValueError(
            f"the results of {report} come to {len(text.encode()):,} bytes, over {MAX_BYTES:,}: leave the long "
            "tables out of the report's results.json (they stay in its CSV files)"
        )
    path = root / study / "results" / f"{name}.json"
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, lambda tmp: tmp.write_text(text))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.record", description=__doc__.split("\n\n")[0])
    parser.add_argument("study", help="the study's name, as in `interp study NAME`")
    parser.add_argument("report", help="the report folder the run wrote (--out)")
    parser.add_argument("--as", dest="name", default="default", help="the file's stem (default: default)")
    args = parser.parse_args(argv)
    try:
        path = record(args.study, args.report, args.name)
    except ValueError as err:
        print(f"studies.record: error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
