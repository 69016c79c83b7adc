"""Run the studies from two versions of the code with the same seed and compare their ``results.json``.

A refactor must not change what a study reports: for the same seed, ``results.json`` should be the same file.
This script exports a git ref (``git archive``, so no checkout or branch changes), runs every study from it and
from the working tree, each in its own process with its tree first on ``PYTHONPATH``, and compares the two
``results.json`` of each study value by value. Keys that hold wall-clock times (``--ignore``) differ between
any two runs and are left out; the script says which.

    python scripts/compare_results.py --ref main --out /tmp/compare
    python scripts/compare_results.py --ref main --out /tmp/compare --studies scaling,heads

It exits with status 1 when any study's results differ, and prints the paths that do.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ("scaling", "position", "residual", "heads", "recurrence", "coreference")
MORE = ("qk", "circuits", "attribution")
"""Studies run only when named in ``--studies``: each takes minutes on a CPU even at the small settings below."""
STUDY_ARGS = {
    "coreference": ["--limit", "40"],
    "qk": ["--pairs", "4", "--heads", "L28H4", "--top-heads", "1", "--top", "2", "--random-draws", "1"],
    "circuits": ["--pairs", "4", "--test-pairs", "4", "--exact-pairs", "2", "--exact-edges", "4", "--exact-top", "2"],
    "attribution": [
        "--texts", "20", "--d-transcoder", "64", "--k", "4", "--epochs", "1", "--pairs", "1",
        "--max-feature-nodes", "16", "--top", "2", "--random-draws", "1", "--heads", "L25H2",
    ],
}  # fmt: skip
WORK = {"attribution"}
"""Studies that cache what they train under ``--work``: each side gets its own folder, so neither reads the
other's."""
IGNORE = ("*.train_s", "*.ms", "headline.LSTM cell loop / transformer pass*", "*.timings_s.*", "*seconds")
"""Keys that hold wall-clock times: the recurrence study's training and forward times, the steering study's
stage times, the attribution study's ``seconds`` and ``eval_seconds``."""

RUN = """
import importlib, sys
package = importlib.import_module("studies." + sys.argv[1])
main = getattr(package, "main", None) or importlib.import_module("studies." + sys.argv[1] + ".study").main
sys.exit(main(sys.argv[2:]))
"""


def export(ref: str, into: Path) -> Path:
    """The tree of ``ref``, unpacked into ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(into, filter="data")
    return into


def run_study(tree: Path, study: str, out: Path, seed: int) -> float:
    """Run ``study`` from ``tree`` into ``out``; returns the wall time in seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    args = ["--quiet", "--seed", str(seed), "--out", str(out), *STUDY_ARGS.get(study, [])]
    if study in WORK:
        args += ["--work", str(out.parent / f"{study}-work")]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUN, study, *args], check=True, env=env, cwd=tree)
    return time.perf_counter() - start


def differences(a, b, ignore, path: str = "") -> list[str]:
    """Dotted paths where ``a`` and ``b`` differ, skipping paths that match a pattern in ``ignore``."""
    if any(fnmatch.fnmatchcase(path, pattern) for pattern in ignore):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append(f"{sub} (only in {'the ref' if key in a else 'the working tree'})")
            else:
                out += differences(a[key], b[key], ignore, sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, ignore, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"[:300]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--ref", default="main", help="the git ref to compare the working tree with")
    parser.add_argument("--out", required=True, help="a folder for both runs' reports")
    parser.add_argument(
        "--studies", default=",".join(STUDIES), help=f"comma separated; also {', '.join(MORE)} (slower)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ignore", action="append", default=list(IGNORE), help="fnmatch pattern of a key path"
    )
    args = parser.parse_args()
    out = Path(args.out)
    ref_tree = export(args.ref, out / "ref-source")  # beside, not inside, the two sides' reports
    same = True
    for study in args.studies.split(","):
        seconds = [
            run_study(tree, study, out / side / study, args.seed)
            for tree, side in ((ref_tree, "ref"), (ROOT, "tree"))
        ]
        a, b = (json.loads((out / side / study / "results.json").read_text()) for side in ("ref", "tree"))
        found = differences(a, b, args.ignore)
        ignored = sum(1 for _ in _ignored_paths(a, args.ignore))
        status = "identical" if not found else f"{len(found)} difference(s)"
        print(
            f"{study:12s} {status}; {ignored} timing value(s) ignored; {seconds[0]:.0f} s and {seconds[1]:.0f} s"
        )
        for line in found[:20]:
            print(f"    {line}")
        same &= not found
    return 0 if same else 1


def _ignored_paths(value, ignore, path: str = ""):
    if path and any(fnmatch.fnmatchcase(path, pattern) for pattern in ignore):
        yield path
    elif isinstance(value, dict):
        for key, sub in value.items():
            yield from _ignored_paths(sub, ignore, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _ignored_paths(sub, ignore, f"{path}[{i}]")


if __name__ == "__main__":
    sys.exit(main())
