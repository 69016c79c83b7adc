"""Hand-written checks for ``manifest.json`` and ``results.json``.

The checks collect every problem before raising, so one failing test shows all that is wrong with a file. They
are used by the writer's tests and by each study's tests (``validate_results(d, required=["accuracy"])``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from interp.report.manifest import MANIFEST_SCHEMA, VERSIONED_PACKAGES

RESULTS_SCHEMA = "interp.report.results/1"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NUMBER = (int, float)


class ReportSchemaError(ValueError):
    """A manifest or results dict does not have the documented shape; ``problems`` lists every issue."""

    def __init__(self, what: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"invalid {what}:\n  - " + "\n  - ".join(problems))


def validate_manifest(manifest: Any) -> None:
    """Check a ``manifest.json`` dict.

    Raises:
        ReportSchemaError: Listing every missing key, unexpected key and wrongly typed value.
    """
    p: list[str] = []
    if not _is_dict(manifest, "manifest", p):
        raise ReportSchemaError("manifest", p)
    m = manifest
    _keys(
        m,
        "manifest",
        {
            "schema",
            "title",
            "created",
            "wall_time_s",
            "command",
            "seed",
            "model",
            "data",
            "config",
            "device",
            "dtype",
            "versions",
            "source",
            "platform",
            "files",
        },  # fmt: skip
        p,
    )
    if "schema" in m and m["schema"] != MANIFEST_SCHEMA:
        p.append(f"manifest['schema'] is {m['schema']!r}, expected {MANIFEST_SCHEMA!r}")
    for key in ("title", "created", "platform"):
        _typed(m, key, str, "manifest", p)
    _typed(m, "wall_time_s", _NUMBER, "manifest", p)
    if isinstance(m.get("wall_time_s"), _NUMBER) and not m["wall_time_s"] >= 0:
        p.append(f"manifest['wall_time_s'] must be >= 0, got {m['wall_time_s']!r}")
    if _typed(m, "command", list, "manifest", p) and not all(isinstance(a, str) for a in m["command"]):
        p.append("manifest['command'] must be a list of strings")
    _typed(m, "seed", int, "manifest", p, nullable=True)
    for key in ("device", "dtype"):
        _typed(m, key, str, "manifest", p, nullable=True)
    if _typed(m, "model", dict, "manifest", p, nullable=True) and m["model"] is not None:
        _input(m["model"], "manifest['model']", p, name=True)
    if _typed(m, "data", list, "manifest", p):
        for i, d in enumerate(m["data"]):
            if _is_dict(d, f"manifest['data'][{i}]", p):
                _input(d, f"manifest['data'][{i}]", p, name=False)
    if _typed(m, "config", dict, "manifest", p):
        _json_values(m["config"], "manifest['config']", p)
    if _typed(m, "versions", dict, "manifest", p):
        _keys(m["versions"], "manifest['versions']", {"python", *VERSIONED_PACKAGES}, p)
        for key in ("python", *VERSIONED_PACKAGES):
            _typed(m["versions"], key, str, "manifest['versions']", p, nullable=key != "python")
    if _typed(m, "source", dict, "manifest", p, nullable=True) and m["source"] is not None:
        _keys(m["source"], "manifest['source']", {"commit", "dirty"}, p)
        _typed(m["source"], "commit", str, "manifest['source']", p)
        _typed(m["source"], "dirty", bool, "manifest['source']", p)
    if _typed(m, "files", dict, "manifest", p):
        for name, sha in m["files"].items():
            if not (isinstance(sha, str) and _SHA256.match(sha)):
                p.append(f"manifest['files'][{name!r}] must be a hex SHA-256, got {sha!r}")
    if p:
        raise ReportSchemaError("manifest", p)


def validate_results(results: Any, *, required: Iterable[str] = ()) -> None:
    """Check a ``results.json`` dict, and that ``results["results"]`` has every key in ``required``.

    Raises:
        ReportSchemaError: Listing every missing key, unexpected key and wrongly typed value.
    """
    p: list[str] = []
    if not _is_dict(results, "results", p):
        raise ReportSchemaError("results", p)
    r = results
    _keys(r, "results", {"schema", "title", "headline", "figures", "tables", "results"}, p)
    if "schema" in r and r["schema"] != RESULTS_SCHEMA:
        p.append(f"results['schema'] is {r['schema']!r}, expected {RESULTS_SCHEMA!r}")
    _typed(r, "title", str, "results", p)
    if _typed(r, "headline", dict, "results", p):
        for name, h in r["headline"].items():
            _headline(h, f"results['headline'][{name!r}]", p)
    if _typed(r, "figures", dict, "results", p):
        for name, path in r["figures"].items():
            if path != f"figures/{name}.png":
                p.append(f"results['figures'][{name!r}] must be 'figures/{name}.png', got {path!r}")
    if _typed(r, "tables", dict, "results", p):
        for name, t in r["tables"].items():
            where = f"results['tables'][{name!r}]"
            if _is_dict(t, where, p):
                _keys(t, where, {"csv", "rows", "columns"}, p)
                if t.get("csv") != f"tables/{name}.csv":
                    p.append(f"{where}['csv'] must be 'tables/{name}.csv', got {t.get('csv')!r}")
                _typed(t, "rows", int, where, p)
                if _typed(t, "columns", list, where, p) and not all(isinstance(c, str) for c in t["columns"]):
                    p.append(f"{where}['columns'] must be a list of strings")
    if _typed(r, "results", dict, "results", p):
        _json_values(r["results"], "results['results']", p)
        p.extend(f"results['results'] lacks required key {k!r}" for k in required if k not in r["results"])
    if p:
        raise ReportSchemaError("results", p)


def _headline(h: Any, where: str, p: list[str]) -> None:
    if not _is_dict(h, where, p):
        return
    _keys(h, where, {"value", "ci", "unit", "note"}, p)
    if "value" in h and not (h["value"] is None or isinstance(h["value"], (str, bool, *_NUMBER))):
        p.append(f"{where}['value'] must be a number, string, bool or null, got {type(h['value']).__name__}")
    ci = h.get("ci")
    if ci is not None and not (
        isinstance(ci, list) and len(ci) == 2 and all(c is None or isinstance(c, _NUMBER) for c in ci)
    ):
        p.append(f"{where}['ci'] must be null or [low, high], got {ci!r}")
    for key in ("unit", "note"):
        _typed(h, key, str, where, p, nullable=True)


def _input(d: dict, where: str, p: list[str], *, name: bool) -> None:
    keys = {"path", "sha256", "bytes"} | ({"name"} if name else set())
    if name and "description" in d:  # a packaged model says exactly what it is; optional for the others
        keys.add("description")
        _typed(d, "description", str, where, p)
    _keys(d, where, keys, p)
    if name:
        _typed(d, "name", str, where, p, nullable=True)
    for key in ("path", "sha256"):
        _typed(d, key, str, where, p, nullable=name)
    _typed(d, "bytes", int, where, p, nullable=name)
    if isinstance(d.get("sha256"), str) and not _SHA256.match(d["sha256"]):
        p.append(f"{where}['sha256'] must be a hex SHA-256, got {d['sha256']!r}")


def _is_dict(value: Any, where: str, p: list[str]) -> bool:
    if isinstance(value, dict):
        return True
    p.append(f"{where} must be an object, got {type(value).__name__}")
    return False


def _keys(d: dict, where: str, expected: set[str], p: list[str]) -> None:
    p.extend(f"{where} lacks key {k!r}" for k in sorted(expected - d.keys()))
    p.extend(f"{where} has unexpected key {k!r}" for k in sorted(d.keys() - expected, key=str))


def _typed(d: dict, key: str, types: Any, where: str, p: list[str], *, nullable: bool = False) -> bool:
    """Record a problem unless ``d[key]`` has type ``types`` (or is None if nullable); True if valid."""
    if key not in d:
        return False  # reported by _keys
    value = d[key]
    if value is None and nullable:
        return True
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types))
    if not ok:
        names = "/".join(t.__name__ for t in _as_tuple(types)) + (" or null" if nullable else "")
        p.append(f"{where}[{key!r}] must be {names}, got {type(value).__name__} {value!r:.60}")
    return ok


def _as_tuple(types: Any) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def _json_values(value: Any, where: str, p: list[str]) -> None:
    """Record every value below ``value`` that is not plain, finite JSON."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                p.append(f"{where} has a non-string key {k!r}")
            _json_values(v, f"{where}[{k!r}]", p)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _json_values(v, f"{where}[{i}]", p)
    elif isinstance(value, float) and not math.isfinite(value):
        p.append(f"{where} is {value!r}; write non-finite numbers as null")
    elif not (value is None or isinstance(value, (str, bool, int, float))):
        p.append(f"{where} has non-JSON type {type(value).__name__}")
