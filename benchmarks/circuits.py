"""Time and peak memory of EAP and EAP-IG over agreement pairs, against the cost model, and of one circuit run.

The cost model counts passes: per batch, EAP is 2 forwards and 1 backward, EAP-IG with ``steps`` points is
``steps + 1`` forwards and ``steps`` backwards, and evaluating one circuit is 3 forwards (the corrupted run, the
full model and the circuit). Unit costs are measured on the plain model: a forward pass without hooks (the
metric read at the final position, as the methods read it) and a backward pass of the metric to the input
embeddings, each the faster of two, over every batch. They are measured twice: in a fresh process of their own
(``ratio``, the figure the earlier tables give) and in each method's process right after the method (``ratio
here``: the same load on a shared machine, and a process whose memory is already mapped, so bare passes cost
less and the ratio is the stricter one). The method runs once from cold (``ratio`` and ``ratio here``, with its
peak memory; the figures the earlier tables give), then warm for ``--rounds`` rounds, each the method followed
by the unit costs measured again (``warm``: each round's ratio and their median). The unit costs are the
faster of two passes, so only the cold run pays for reading the weights in from their file and for the first
call of each kernel shape; a warm round compares like with like, under the load of the same minute on a
shared machine. The ratio is what the split inputs, the per-head outputs and the score contractions cost on
top of bare passes.

Peak memory: each measurement runs in a child process of its own; on CPU its peak anonymous resident memory
minus what it held after loading the model and the pairs, on CUDA ``torch.cuda.max_memory_allocated`` likewise.
Anonymous: the packaged weights are mapped from their file and join the resident set as the first pass reads
them, half a GiB for SmolLM2 that has nothing to do with the method measured (the figures before this meter,
kept in ``benchmarks/README.md``, counted them). Run it with ``--pairs 16`` and ``--pairs 64`` to see that the
peak follows the batch (its size and its longest sequence, printed) and not the number of pairs.

    python benchmarks/circuits.py --pairs 64 --threads 1 --out benchmarks/results/circuits-cpu.json
    python benchmarks/circuits.py --pairs 4 --batch-size 2 --steps 2     # a quick check that it runs

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import provenance
import torch

MEASUREMENTS = ("units", "eap", "eap-ig", "circuit")
ROOT = Path(__file__).resolve().parents[1]  # the checkout measured, ahead of any installed copy


class PeakRSS:
    """The largest resident set of this process while the block runs, sampled every 2 ms from /proc (the
    process's lifetime peak, ``ru_maxrss``, is set by loading the model and says nothing about the run).
    ``anonymous``: count only memory not backed by a file (leaving out weights mapped from their file)."""

    def __init__(self, anonymous: bool = False) -> None:
        self.anonymous = anonymous

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = _rss_mib(self.anonymous)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss_mib(self.anonymous))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mib(self.anonymous))


def _rss_mib(anonymous: bool = False) -> float:
    with open("/proc/self/statm") as f:
        fields = f.read().split()  # pages: size, resident, resident and backed by a file or shared, ...
    pages = int(fields[1]) - (int(fields[2]) if anonymous else 0)
    return pages * resource.getpagesize() / 2**20


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _setup(args):
    import interp
    from studies.circuits.data import build_pairs, sample
    from studies.data.load import load_items, twin_pairs

    torch.set_num_threads(args.threads)
    model = interp.load(args.model, device=args.device, dtype=args.dtype)
    pairs, _ = build_pairs(model, twin_pairs(load_items("agreement")))
    return model, sample(pairs, args.pairs, 0).pairs


def _bare_passes(model, batch) -> tuple[float, float]:
    """Seconds of one forward pass without hooks and of the backward pass of the metric to the input embeddings."""
    from interp.circuits import logit_difference
    from interp.circuits.wiring import forward

    with torch.no_grad():
        start = time.perf_counter()
        forward(model, batch.clean, batch.attention_mask, batch.positions)
        _sync()
        forward_s = time.perf_counter() - start
    leaf = []

    def grab(x, hook):
        leaf.append(x.detach().requires_grad_(True))
        return leaf[-1]

    logits = forward(
        model, batch.clean, batch.attention_mask, batch.positions, fwd_hooks=[("hook_embed", grab)]
    )
    _sync()
    start = time.perf_counter()
    logit_difference(logits, batch).sum().backward(inputs=leaf)
    _sync()
    return forward_s, time.perf_counter() - start


def _units(model, pairs, batch_size: int) -> dict:
    """Seconds of plain forward and backward passes over every batch (each timed twice, the faster kept)."""
    fwd = bwd = 0.0
    for span in pairs.batches(batch_size):
        batch = pairs[span.start : span.stop].to(model.device)
        times = [_bare_passes(model, batch) for _ in range(2)]
        fwd, bwd = fwd + min(f for f, _ in times), bwd + min(b for _, b in times)
    return {"forward_s": fwd, "backward_s": bwd}


def child(args) -> dict:
    """One measurement in this process: its seconds and the memory it took on top of the model and pairs."""
    from interp.circuits import Circuit, edge_attribution, evaluate, logit_difference, top_n

    model, pairs = _setup(args)
    if args.child == "units":
        return _units(model, pairs, args.batch_size)
    circuit = Circuit.load(args.circuit_file) if args.child == "circuit" else None

    def method():
        if circuit is not None:
            return evaluate(model, circuit, pairs, logit_difference, batch_size=args.batch_size)
        return edge_attribution(
            model, pairs, logit_difference, method=args.child, steps=args.steps, batch_size=args.batch_size
        )

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() / 2**20
    with PeakRSS(anonymous=True) as rss:
        start = time.perf_counter()
        result = method()
        _sync()
        out = {"seconds": time.perf_counter() - start}
    out["peak_extra_mib"] = torch.cuda.max_memory_allocated() / 2**20 - base if cuda else rss.peak - rss.start
    if (
        circuit is None and args.child == "eap"
    ):  # the circuit the next measurement evaluates, in its own process
        top_n(result, args.circuit_edges).save(args.circuit_file)
    if circuit is not None:
        out["edges"], out["faithfulness"] = circuit.n_edges, result.faithfulness[0]
    # Then warm (the weights read in, every kernel shape met): rounds of the method and, right after it, the
    # unit costs, so that each round's ratio compares passes made under the same load on a shared machine.
    out["rounds"] = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        method()
        _sync()
        seconds = time.perf_counter() - start
        out["rounds"].append({"seconds": seconds, "units": _units(model, pairs, args.batch_size)})
    # "ratio here" reads the unit costs measured first after the cold run
    out["units"] = out["rounds"][0]["units"]
    spans = pairs.batches(args.batch_size)
    out["batches"] = len(spans)
    out["n_pos"] = pairs.n_pos
    out["longest_batch_pos"] = max(pairs[span.start : span.stop].n_pos for span in spans)  # sets the peak
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--circuit-edges", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="warm rounds of each method and its unit costs")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--out", default=None, help="write the measurements as JSON here")
    parser.add_argument("--child", choices=MEASUREMENTS, help=argparse.SUPPRESS)
    parser.add_argument("--circuit-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.child:
        print(json.dumps(child(args)))
        return 0
    torch.set_num_threads(args.threads)
    env = provenance.environment()
    passed = [f"--model={args.model}", f"--pairs={args.pairs}", f"--batch-size={args.batch_size}",
              f"--steps={args.steps}", f"--circuit-edges={args.circuit_edges}",
              f"--threads={args.threads}", f"--rounds={args.rounds}"]  # fmt: skip
    passed += [f"--{k}={v}" for k, v in (("device", args.device), ("dtype", args.dtype)) if v is not None]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        passed.append(f"--circuit-file={Path(tmp) / 'circuit.json'}")
        for name in MEASUREMENTS:  # "eap" writes the circuit that "circuit" evaluates
            cmd = [sys.executable, __file__, *passed, "--child", name]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return done.returncode
            results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    s = args.steps

    def cost_model(name: str, units: dict) -> float:
        f, b = units["forward_s"], units["backward_s"]
        return {"eap": 2 * f + b, "eap-ig": (s + 1) * f + s * b, "circuit": 3 * f}[name]

    report = {
        "model": args.model,
        "pairs": args.pairs,
        "batch_size": args.batch_size,
        "steps": s,
        "threads": args.threads,
        "torch": torch.__version__,
        "units": results["units"],
        "rows": [
            {
                "measurement": name,
                "seconds": results[name]["seconds"],
                "cost_model_s": cost_model(name, results["units"]),
                "ratio": results[name]["seconds"] / cost_model(name, results["units"]),
                "units_here": results[name]["units"],
                "cost_model_here_s": cost_model(name, results[name]["units"]),
                "ratio_here": results[name]["seconds"] / cost_model(name, results[name]["units"]),
                "rounds": [
                    {
                        "seconds": r["seconds"],
                        "cost_model_s": cost_model(name, r["units"]),
                        "ratio": r["seconds"] / cost_model(name, r["units"]),
                    }
                    for r in results[name]["rounds"]
                ],
                "ratio_warm": statistics.median(
                    r["seconds"] / cost_model(name, r["units"]) for r in results[name]["rounds"]
                ),
                "peak_extra_mib": results[name]["peak_extra_mib"],
            }
            for name in ("eap", "eap-ig", "circuit")
        ],
        "circuit_edges": results["circuit"]["edges"],
        "batches": results["eap"]["batches"],
        "longest_batch_pos": results["eap"]["longest_batch_pos"],
    }
    print(
        f"{args.model}, {args.pairs} pairs in batches of {args.batch_size}, {s} EAP-IG steps, {args.threads} thread(s)"
    )
    print(f"{report['batches']} batches, the longest {report['longest_batch_pos']} positions")
    units = results["units"]
    print(f"unit costs over all batches: forward {units['forward_s']:.2f} s, backward {units['backward_s']:.2f} s "
          "(own process); 'here': measured in the method's process after it")  # fmt: skip
    print(f"{'':10s} {'cold':>8s} {'cost model':>11s} {'ratio':>6s} {'ratio here':>10s}   warm: ratio each round "
          f"{'median':>7s} {'peak extra':>11s}")  # fmt: skip
    for r in report["rows"]:
        rounds = " ".join(f"{x['ratio']:.2f}" for x in r["rounds"])
        print(f"{r['measurement']:10s} {r['seconds']:7.2f}s {r['cost_model_s']:10.2f}s {r['ratio']:6.2f} "
              f"{r['ratio_here']:10.2f}   {rounds:>22s} {r['ratio_warm']:7.2f} "
              f"{r['peak_extra_mib']:7.0f} MiB")  # fmt: skip
    print(
        f"(circuit: one evaluation of the top {args.circuit_edges} EAP edges, {report['circuit_edges']} after pruning)"
    )
    if args.out:
        provenance.write_run(args.out, report, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
