"""How the explanation backends keep a model busy: the local one batches prompts, the HTTP one keeps several
requests in flight.

The same scorer requests (detection prompts of planted features, one example each, 7 tokens to generate) are
answered, with no cache:

- by :class:`~interp.sae.explanations.LocalBackend` on the packaged SmolLM2, ``--batch-sizes`` prompts per
  ``model.generate`` call: the wall time, and the calls made;
- by :class:`~interp.sae.explanations.EndpointBackend` against ``transformers serve`` on loopback (the same
  model, written out as a Hugging Face folder by the tests' helper), with ``--concurrency`` requests in flight:
  the wall time, the most requests in flight at once and the mean number in flight (the requests' summed
  durations over the wall time), read from the client's own record of when each was sent and answered, and
  the number in flight at ten moments of the run.

    python benchmarks/explanations.py --threads 2 --requests 16 --out benchmarks/results/explanations.json

This is a measurement script, not a test; it uses the tests' helpers (the planted features, the server).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import provenance
import torch

import interp
from interp.sae.explanations import (
    DetectionScorer,
    EndpointBackend,
    FeatureFiles,
    LocalBackend,
    chat_template_of,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' helpers, however the script is started

from tests.sae.explanations.planted import PLANTED, write_folder  # noqa: E402
from tests.sae.explanations.server import hf_folder, serve  # noqa: E402


def requests(n: int) -> list:
    """``n`` detection requests of one example each, over the planted features."""
    with tempfile.TemporaryDirectory() as root:
        folder = FeatureFiles.open(write_folder(Path(root)))
        found = []
        for planted in PLANTED:
            record = folder.record(planted.id)
            _, test = record.split(2, n, seed=0)
            test = [e.window(32) for e in test]
            negatives = record.negatives(len(test), 32, seed=0)
            scorer = DetectionScorer(per_prompt=1, probabilities=False)
            found += scorer.prepare(planted.explanation, test, negatives, key=planted.id.index).requests
    return found[:n]


def in_flight_at(timeline: list[tuple[float, float]], moments: int = 10) -> list[int]:
    start, end = min(s for s, _ in timeline), max(e for _, e in timeline)
    points = [start + (end - start) * (i + 0.5) / moments for i in range(moments)]
    return [sum(s <= t < e for s, e in timeline) for t in points]


def measure_local(asked: list, batch_sizes: list[int], results: dict) -> None:
    model = interp.load("smollm2-135m")
    template = chat_template_of("smollm2-135m")
    for batch in batch_sizes:
        backend = LocalBackend(model, name="smollm2-135m", chat_template=template, batch_size=batch)
        start = time.perf_counter()
        backend.complete(asked)
        wall = time.perf_counter() - start
        results["local"].append({"batch_size": batch, "seconds": wall, "generate_calls": backend.batches})
        print(f"local, {batch} prompts per call: {wall:.1f} s, {backend.batches} generate calls")


def measure_http(asked: list, concurrencies: list[int], options: list[str], results: dict) -> None:
    results["serve_options"] = options
    with tempfile.TemporaryDirectory() as logs, serve(hf_folder(), Path(logs) / "serve.log", *options) as url:
        for concurrency in concurrencies:
            backend = EndpointBackend(url, concurrency=concurrency, timeout=600)
            backend.check()
            backend.timeline.clear()
            start = time.perf_counter()
            backend.complete(asked)
            wall = time.perf_counter() - start
            busy = sum(e - s for s, e in backend.timeline)
            row = {
                "concurrency": concurrency,
                "seconds": wall,
                "max_in_flight": backend.max_in_flight(),
                "mean_in_flight": busy / wall,
                "in_flight_at_tenths": in_flight_at(backend.timeline),
            }
            results["http"].append(row)
            print(
                f"http, {concurrency} in flight allowed: {wall:.1f} s, at most {row['max_in_flight']} in flight, "
                f"{row['mean_in_flight']:.2f} on average; in flight at each tenth: {row['in_flight_at_tenths']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parts", default="local,http", help="which backends to measure")
    parser.add_argument(
        "--serve-options", default="", help="more options of transformers serve, space separated"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    env = provenance.environment(["transformers", "openai"])
    asked = requests(args.requests)
    results: dict = {
        "requests": len(asked),
        "threads": args.threads,
        "torch": torch.__version__,
        "local": [],
        "http": [],
    }
    print(
        f"{len(asked)} requests, {torch.get_num_threads()} torch threads, {platform.processor() or platform.machine()}"
    )

    parts = args.parts.split(",")
    if "local" in parts:
        measure_local(asked, [int(b) for b in args.batch_sizes.split(",")], results)
    if "http" in parts:
        measure_http(
            asked, [int(c) for c in args.concurrency.split(",")], args.serve_options.split(), results
        )
    if args.out:
        provenance.write_run(args.out, results, env)


if __name__ == "__main__":
    main()
