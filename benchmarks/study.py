"""Wall time of the default coreference study, split into model forwards and everything else.

Every ``HookedTransformer.forward`` call is timed (hooks and caching included, as they run inside it); the
rest is tokenisation, backward passes of attribution patching, analysis, figures and the report.

    python benchmarks/study.py --threads 2 -- --limit 40

Arguments after ``--`` go to ``interp study coreference``. This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import provenance
import torch

from interp import HookedTransformer
from interp.registry import load_study


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="write the timings as JSON here")
    parser.add_argument("study_args", nargs="*")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = provenance.environment()

    spent = {"forward_s": 0.0, "forward_calls": 0}
    original = HookedTransformer.forward

    def timed_forward(self, *a, **k):
        start = time.perf_counter()
        try:
            return original(self, *a, **k)
        finally:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            spent["forward_s"] += time.perf_counter() - start
            spent["forward_calls"] += 1

    HookedTransformer.forward = timed_forward
    try:
        with tempfile.TemporaryDirectory() as tmp:
            study_args = list(args.study_args)
            if "--out" not in study_args:
                study_args += ["--out", str(Path(tmp) / "report")]
            start = time.perf_counter()
            code = load_study("coreference")([*study_args, "--quiet"])
            wall = time.perf_counter() - start
    finally:
        HookedTransformer.forward = original
    result = {
        "threads": args.threads,
        "study_args": args.study_args,
        "wall_s": wall,
        **spent,
        "other_s": wall - spent["forward_s"],
        "forward_fraction": spent["forward_s"] / wall,
    }
    print(
        f"coreference study: {wall:.1f} s wall on {args.threads} threads; forwards {spent['forward_s']:.1f} s "
        f"({spent['forward_calls']} calls, {100 * result['forward_fraction']:.0f}%), "
        f"everything else {result['other_s']:.1f} s"
    )
    if args.out:
        provenance.write_run(args.out, result, env)
    return code


if __name__ == "__main__":
    sys.exit(main())
