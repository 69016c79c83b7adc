"""Activation store throughput and memory: rows a second, and peak resident memory against the store's size.

A random-weight model (``--shape``) runs pre-tokenized batches of random ids (``--items`` items of
``--tokens`` tokens) into a store of every block's ``hook_resid_post``. The peak resident memory of the
process is read before the run (model built, one warm-up batch) and after it: the growth should be about
one shard plus one batch, far below the store's size.

    python benchmarks/store.py --threads 1
    python benchmarks/store.py --device cuda --shape gpt2-small --items 20000

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import provenance
import torch

from interp import HookedTransformer, TransformerConfig
from interp.store import cache_activations

SHAPES = {
    "small": dict(n_layers=4, d_model=256, n_heads=4, d_vocab=4096),
    "gpt2-small": dict(n_layers=12, d_model=768, n_heads=12, d_vocab=50257),
}


def peak_rss_mib() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--shard-rows", type=int, default=4096)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None, help="write the numbers as JSON here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    env = provenance.environment()
    cfg = TransformerConfig(**SHAPES[args.shape], n_ctx=max(args.tokens, 128), seed=0, name=args.shape)
    model = HookedTransformer(cfg).to(args.device).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.d_vocab, (args.items, args.tokens), generator=g)
    batches = list(ids.split(args.batch_size))
    hooks = "blocks.*.hook_resid_post"
    folder = Path(tempfile.mkdtemp(prefix="store-bench-"))
    try:
        cache_activations(model, batches[:1], hooks, folder / "warm", progress=False)
        before = peak_rss_mib()
        store = cache_activations(
            model, batches, hooks, folder / "s", shard_rows=args.shard_rows, progress=False
        )
        after = peak_rss_mib()
        clock = time.perf_counter()
        cache_activations(model, batches, hooks, folder / "s", shard_rows=args.shard_rows, progress=False)
        noop = time.perf_counter() - clock
        clock = time.perf_counter()
        with torch.inference_mode():
            for batch in batches:  # the same forwards and captures, written nowhere
                model.run_with_cache(batch.to(args.device), names_filter=hooks, device="cpu")
        forward = time.perf_counter() - clock
        row_bytes = cfg.n_layers * cfg.d_model * 4
        result = {
            "shape": args.shape,
            "device": args.device,
            "threads": torch.get_num_threads(),
            "rows": len(store),
            "shards": len(store.shards),
            "store_mib": round(store.meta["bytes"] / 2**20, 1),
            "seconds": round(store.run.seconds, 2),
            "rows_per_s": round(store.run.rows_written / store.run.seconds),
            "forward_and_capture_only_seconds": round(forward, 2),
            "peak_rows_held": store.run.peak_rows,
            "bound_rows": args.shard_rows + args.batch_size * args.tokens,
            "shard_buffer_mib": round(args.shard_rows * row_bytes / 2**20, 1),
            "peak_rss_growth_mib": round(after - before, 1),
            "complete_rerun_seconds": round(noop, 2),
        }
    finally:
        shutil.rmtree(folder)
    print(json.dumps(result, indent=1))
    if args.out:
        provenance.write_run(args.out, result, env)


if __name__ == "__main__":
    main()
