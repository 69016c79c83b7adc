"""Edge scores of EAP and EAP-IG from two versions of the code, on the same pairs, in float32 and float64.

A change meant to make edge attribution cheaper must not change what it computes. In float32 any two orders
of the same arithmetic round differently (a fused attention kernel, a product split another way, a sum over
fewer positions), by a few 1e-6 on scores of a few units. The two versions are also run on the model loaded
in float64, where that rounding shrinks to what is still computed in float32 there (the norms' statistics, as
in ``transformers``, and the store of differences): a real change in the method would show at its own size.
The float64 run of each version also measures how far its float32 scores are from those, which is the scale
any float32 difference should be read against.

The git ref is exported (``git archive``, no checkout), and each version runs in its own process with its
tree first on ``PYTHONPATH``, on the first ``--pairs`` agreement pairs of the packaged SmolLM2.

    python scripts/compare_edge_scores.py --ref 67fd4f6 --pairs 8
    python scripts/compare_edge_scores.py --ref main --pairs 16 --dtypes float64

It exits with status 1 when a float64 difference exceeds ``--tolerance`` (default 1e-6).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from compare_results import export  # scripts/ is on the path when this file runs as a script

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("eap", "eap-ig")

SCORE = """
import sys, torch
import interp
from interp.circuits import edge_attribution, logit_difference
from studies.circuits.data import build_pairs, sample
from studies.data.load import load_items, twin_pairs

n, dtype, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.set_num_threads(1)
model = interp.load("smollm2-135m", dtype=dtype)
pairs, _ = build_pairs(model, twin_pairs(load_items("agreement")))
pairs = sample(pairs, n, 0).pairs
scores = {m: edge_attribution(model, pairs, logit_difference, method=m, steps=5, batch_size=8).scores.double()
          for m in ("eap", "eap-ig")}
torch.save(scores, out)
"""


def scores(tree: Path, pairs: int, dtype: str, out: Path) -> dict[str, torch.Tensor]:
    """EAP and EAP-IG scores computed by the code in ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-c", SCORE, str(pairs), dtype, str(out)], check=True, env=env, cwd=tree)
    return torch.load(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="the git ref of the version before")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--tolerance", type=float, default=1e-6, help="largest float64 difference allowed")
    args = parser.parse_args()
    dtypes = args.dtypes.split(",")
    got: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": export(args.ref, Path(tmp) / "before"), "after": ROOT}
        for version, tree in trees.items():
            for dtype in dtypes:
                got[version, dtype] = scores(tree, args.pairs, dtype, Path(tmp) / f"{version}-{dtype}.pt")
    print(f"{args.pairs} agreement pairs, SmolLM2; before = {args.ref}, after = the working tree")
    print(f"{'method':8s} {'dtype':8s} {'max |score|':>12s} {'max |after - before|':>21s}")
    failed = False
    for method in METHODS:
        for dtype in dtypes:
            before, after = got["before", dtype][method], got["after", dtype][method]
            diff = float((after - before).abs().max())
            print(f"{method:8s} {dtype:8s} {float(before.abs().max()):12.4g} {diff:21.3g}")
            failed |= dtype == "float64" and diff > args.tolerance
        if "float32" in dtypes and "float64" in dtypes:
            for version in ("before", "after"):
                rounding = got[version, "float32"][method] - got[version, "float64"][method]
                print(
                    f"{'':8s} {version} in float32, from its float64 scores: {float(rounding.abs().max()):.3g}"
                )
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
