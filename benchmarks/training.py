"""Training throughput: interp's transcoders against sparsify's, against interp's own SAE trainer, and a
cross-layer transcoder's step against its cost model.

Three comparisons, each in rounds that interleave the compared runs (the order alternating), so that the load
of a shared machine falls on both sides alike; each figure is the median of the per-round ratios, with every
run in the results:

- ``sparsify``: a TopK transcoder (``--d`` in and out, ``--features``, ``--k``, batches of ``--batch-size``) on
  planted rows (:func:`planted`: sparse codes over ``--atoms`` directions write the input through one
  dictionary and the output through another, plus noise), ``--steps`` steps, each library with its own
  defaults: :func:`interp.sae.train` of a transcoder (Adam, AuxK, unit-norm decoders, warm-up and decay), timed as
  the whole call; and sparsify's ``SparseCoder`` with ``transcode=True`` stepped by the loop of its
  ``Trainer.fit`` (its default optimizer, schedule-free sign SGD; its bias initialisation on the first batch;
  no AuxK, sparsify's default), timed from building the coder to the last step. sparsify runs in its own
  environment (``--sparsify-python``, e.g. ``python -m venv V && V/bin/pip install torch==2.13.0
  eai-sparsify==1.3.3``), in a child process like every run here. Both read the same rows (their hashes are
  compared) and are scored on the same held-out rows (FVU: squared error over the outputs' variance). A third
  run per round trains interp for as many steps as fit in sparsify's time (its steps times sparsify's time
  over interp's): the loss after the same time.
- ``sae``: :func:`interp.sae.train` (``--d`` to ``--features``) against ``train(kind="transcoder")`` at the same
  width, on the same inputs, the same steps.
- ``clt``: a CLT over ``--clt-layers`` layers of width ``--clt-d`` with ``--clt-features`` features a layer,
  its step time (the difference of two ``train`` calls of ``2`` and ``2 + --clt-steps`` steps, so
  set-up is left out; AuxK off, see below) over its cost model's, both measured in one process, round by round.

The cost model of one TopK CLT step, for ``B`` rows, ``n`` layers, width ``d``, ``f`` features a layer, ``k``
active, and ``P = n (n + 1) / 2`` (source, output) layer pairs, in multiply-adds:

- encode: ``B n d f`` (one ``[B, d] @ [d, f]`` product a layer), then a top-k over ``[B, f]`` a layer;
- sparse decode: each row's ``k`` features of layer ``s`` write ``k`` decoder rows into each of the ``n - s``
  layers from ``s`` on: ``B k d P``;
- backward: the decoder's gradient ``B k d P`` and the values' ``B k d P`` (an embedding bag's backward pass),
  the encoder's ``B n k d`` (the chosen rows only: :mod:`interp.sae.training.selected`);
- optimizer: Adam over the ``n f d + f d P`` weights (a few passes each), and the decoder kept at unit norm
  (its gradient's component along each feature's decoder removed, then the rows rescaled).

Its time is that of these bare kernels on tensors of the step's shapes, measured in the same process (a
``bmm``, ``topk``, the embedding bags forward and backward, the sparse encoder gradient, ``Adam.step`` and the
two decoder-norm passes): what a step cannot do without. AuxK (a second top-k over each layer's dead features
and a decode of ``d / 2`` of them) runs only while features are dead; the CLT runs are made with no feature
counted dead so that the step is the model's.

    python benchmarks/training.py --sparsify-python V/bin/python --threads 1 --rounds 3 --out results.json
    python benchmarks/training.py --only sae clt --steps 4 --clt-steps 2 --rounds 1     # a quick check

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import provenance
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]


def planted(rows: int, d: int, atoms: int, active: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` ``[rows, d]``: ``active`` of ``atoms`` codes a row, coefficients in [0.5, 2.5), writing ``x``
    through one dictionary of unit directions and ``y`` through another, plus noise of 0.05 a dimension."""
    g = torch.Generator().manual_seed(seed)
    dictionaries = F.normalize(torch.randn(2, atoms, d, generator=g), dim=-1)
    x, y = torch.empty(rows, d), torch.empty(rows, d)
    for start in range(0, rows, 8192):
        m = min(8192, rows - start)
        idx = torch.randint(0, atoms, (m, active), generator=g)
        coef = torch.rand(m, active, generator=g) * 2 + 0.5
        for out, dictionary in ((x, dictionaries[0]), (y, dictionaries[1])):
            code = F.embedding_bag(idx, dictionary, per_sample_weights=coef, mode="sum")  # [m, d]
            out[start : start + m] = code + 0.05 * torch.randn(m, d, generator=g)
    return x, y


def fvu(out: torch.Tensor, y: torch.Tensor) -> float:
    """Squared error over the variance of ``y`` about its mean."""
    return float((out - y).pow(2).sum() / (y - y.mean(0)).pow(2).sum())


def data(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, str]:
    """The training pool, the held-out rows and a hash of both (the same in every environment)."""
    x, y = planted(args.pool_rows + args.heldout_rows, args.d, args.atoms, args.active, seed=0)
    digest = hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()[:16]
    n = args.pool_rows
    return x[:n], y[:n], x[n:], y[n:], digest


class Clock:
    """The time of a ``with`` block: ``seconds`` is the process's CPU time (one thread: the time the work
    took, whatever else the machine runs), ``wall`` the elapsed time."""

    def __enter__(self) -> Clock:
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.process_time() - self._cpu
        self.wall = time.perf_counter() - self._wall

    def times(self) -> dict[str, float]:
        return {"seconds": self.seconds, "wall_seconds": self.wall}


# -- workers (each in a child process) ----------------------------------------------------------------------


def sparsify_worker(args: argparse.Namespace, steps: int) -> dict:
    """sparsify's transcoder, stepped as ``Trainer.fit`` steps it (see the module docstring)."""
    from importlib.metadata import version

    from schedulefree import ScheduleFreeWrapper
    from sparsify import SparseCoder, TranscoderConfig
    from sparsify.sign_sgd import SignSGD

    x, y, xh, yh, digest = data(args)
    b, f = args.batch_size, args.features

    def run(steps: int) -> tuple[SparseCoder, ScheduleFreeWrapper]:
        torch.manual_seed(0)
        coder = SparseCoder(args.d, TranscoderConfig(num_latents=f, k=args.k), "cpu", dtype=torch.float32)
        lr = 5e-3 / (f / 2**14) ** 0.5  # Trainer's default for "signum"
        opt = ScheduleFreeWrapper(SignSGD([dict(params=coder.parameters(), lr=lr)]), momentum=0.95)
        opt.train()
        since_fired = torch.zeros(f, dtype=torch.long)
        for step in range(steps):
            start = (step * b) % (len(x) - b + 1)
            inputs, outputs = x[start : start + b], y[start : start + b]
            if step == 0:  # Trainer.fit's first batch: centred pre-activations, b_dec at the outputs' mean
                coder.encoder.bias.data = -inputs.mean(0) @ coder.encoder.weight.data.T
                coder.b_dec.data = outputs.mean(0)
            out = coder(x=inputs, y=outputs, dead_mask=None)
            did_fire = torch.zeros(f, dtype=torch.bool)
            did_fire[out.latent_indices.flatten()] = True
            (out.fvu + out.multi_topk_fvu / 8).backward()
            opt.step()
            opt.zero_grad()
            since_fired += b
            since_fired[did_fire] = 0
        return coder, opt

    run(2)  # warm-up: first-call costs are not training's
    with Clock() as clock:
        coder, opt = run(steps)
    opt.eval()  # schedule-free: evaluate at the averaged weights, as sparsify saves them
    with torch.no_grad():
        held_out = fvu(coder(x=xh, y=yh).sae_out, yh)
    versions = {"sparsify": version("eai-sparsify"), "schedulefree": version("schedulefree")}
    return dict(**clock.times(), steps=steps, fvu=held_out, data=digest, versions=versions)


def interp_worker(args: argparse.Namespace, steps: int, kind: str) -> dict:
    """interp's ``train`` of a transcoder (``kind="transcoder"``) or an SAE (``kind="sae"``) on the pool."""
    from interp.sae import train

    x, y, xh, yh, digest = data(args)
    common = dict(batch_size=args.batch_size, k=args.k, progress=False, init_rows=min(16384, len(x)))

    def run(steps: int):
        if kind == "sae":
            return train(x, d_sae=args.features, tokens=steps * args.batch_size, **common)
        return train((x, y), kind="transcoder", d_sae=args.features, tokens=steps * args.batch_size, **common)

    run(2)
    with Clock() as clock:
        dictionary = run(steps)
    with torch.no_grad():
        if kind == "sae":
            held_out = fvu(dictionary(xh), xh)
        else:
            held_out = fvu(dictionary.reconstruct({0: xh})[0], yh)
    return dict(**clock.times(), steps=steps, fvu=held_out, data=digest, versions=_interp_versions())


def clt_worker(args: argparse.Namespace) -> dict:
    """Rounds of (CLT step, cost model) in this process; the step from the difference of two calls."""
    from interp.sae import train

    n, d, f, b = args.clt_layers, args.clt_d, args.clt_features, args.batch_size
    g = torch.Generator().manual_seed(0)
    rows = 4 * b
    x, y = torch.randn(rows, n, d, generator=g), torch.randn(rows, n, d, generator=g)
    kw = dict(kind="clt", d_sae=f, k=args.k, batch_size=b, progress=False, dead_after_tokens=10**15)

    def call(steps: int) -> float:
        with Clock() as clock:
            train((x, y), tokens=steps * b, **kw)
        return clock.seconds

    call(2)
    model = CostModel(n, d, f, args.k, b)
    model.time()
    rounds = []
    for _ in range(args.rounds):
        step = (call(2 + args.clt_steps) - call(2)) / args.clt_steps
        bare = model.time()
        rounds.append(dict(step_s=step, model_s=bare, ratio=step / bare))
    return dict(rounds=rounds, macs=model.macs(), versions=_interp_versions())


class CostModel:
    """The bare kernels of one TopK CLT step (see the module docstring), on random tensors of its shapes."""

    def __init__(self, n: int, d: int, f: int, k: int, b: int) -> None:
        g = torch.Generator().manual_seed(1)
        self.n, self.d, self.f, self.k, self.b = n, d, f, k, b
        self.x = torch.randn(n, b, d, generator=g)
        self.w_enc = torch.randn(n, f, d, generator=g).requires_grad_(True)
        self.b_enc = torch.zeros(n, f, requires_grad=True)
        self.w_dec = [torch.randn(f, (n - s) * d, generator=g).requires_grad_(True) for s in range(n)]
        self.params = [self.w_enc, self.b_enc, *self.w_dec]
        self.opt = torch.optim.Adam(self.params, lr=1e-4)

    def macs(self) -> dict[str, int]:
        n, d, f, k, b = self.n, self.d, self.f, self.k, self.b
        pairs = n * (n + 1) // 2
        return dict(
            encode=b * n * d * f, decode=b * k * d * pairs, backward=2 * b * k * d * pairs + b * n * k * d
        )

    def step(self) -> None:
        n, f, k = self.n, self.f, self.k
        with torch.no_grad():
            pre = torch.baddbmm(self.b_enc[:, None], self.x, self.w_enc.transpose(1, 2))  # [n, b, f]
            values, indices = pre.topk(k, dim=-1, sorted=False)  # [n, b, k]
        values.requires_grad_(True)
        loss = 0.0
        for s in range(n):
            out = F.embedding_bag(indices[s], self.w_dec[s], per_sample_weights=values[s], mode="sum")
            loss = loss + out.pow(2).sum()
        loss.backward()
        with (
            torch.no_grad()
        ):  # the encoder's gradient at the chosen entries: a sparse product and an index sum
            latent = (indices + torch.arange(n)[:, None, None] * f).reshape(-1)
            read = torch.arange(n * self.b).repeat_interleave(k)
            chosen = torch.sparse_coo_tensor(
                torch.stack([latent, read]), values.grad.reshape(-1), (n * f, n * self.b)
            )
            self.w_enc.grad = torch.sparse.mm(chosen, self.x.reshape(-1, self.d)).view_as(self.w_enc)
            self.b_enc.grad = torch.zeros(n * f).index_add_(0, latent, values.grad.reshape(-1)).view(n, f)
            for w in self.w_dec:
                w.grad -= (w.grad * w).sum(-1, keepdim=True) * w
        self.opt.step()
        with torch.no_grad():
            for w in self.w_dec:
                w /= w.norm(dim=-1, keepdim=True)
        self.opt.zero_grad(set_to_none=True)

    def time(self, repeats: int = 3) -> float:
        times = []
        for _ in range(repeats):
            with Clock() as clock:
                self.step()
            times.append(clock.seconds)
        return statistics.median(times)


def _interp_versions() -> dict[str, str]:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return {"interp": commit.stdout.strip() or "unknown"}


# -- the parent -------------------------------------------------------------------------------------------


def child(args: argparse.Namespace, worker: str, steps: int) -> dict:
    python = args.sparsify_python if worker == "sparsify" else sys.executable
    cmd = [python, __file__, "--worker", worker, "--worker-steps", str(steps), *sys.argv[1:]]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {worker} worker failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "seconds" in result:
        result["activations_per_s"] = result["steps"] * args.batch_size / result["seconds"]
    result["load_after"] = os.getloadavg()[0]
    return result


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def against_sparsify(args: argparse.Namespace) -> dict:
    rounds = []
    for r in range(args.rounds):
        order = ["sparsify", "transcoder"] if r % 2 == 0 else ["transcoder", "sparsify"]
        runs = {name: child(args, name, args.steps) for name in order}
        theirs, ours = runs["sparsify"], runs["transcoder"]
        same_time = max(1, round(args.steps * theirs["seconds"] / ours["seconds"]))
        runs["transcoder_same_time"] = child(args, "transcoder", same_time)
        if theirs["data"] != ours["data"]:
            raise RuntimeError(
                f"the two environments made different rows: {theirs['data']} and {ours['data']}"
            )
        runs["speed_ratio"] = ours["activations_per_s"] / theirs["activations_per_s"]
        rounds.append(runs)
        print(
            f"  round {r + 1}: interp {ours['activations_per_s']:,.0f} act/s, FVU {ours['fvu']:.3f}; sparsify "
            f"{theirs['activations_per_s']:,.0f} act/s, FVU {theirs['fvu']:.3f}; speed {runs['speed_ratio']:.2f}x; "
            f"interp in sparsify's time ({same_time} steps): FVU {runs['transcoder_same_time']['fvu']:.3f}"
        )
    return {"rounds": rounds, "speed_ratio": spread([r["speed_ratio"] for r in rounds])}


def against_sae(args: argparse.Namespace) -> dict:
    rounds = []
    for r in range(args.rounds):
        order = ["sae", "transcoder"] if r % 2 == 0 else ["transcoder", "sae"]
        runs = {name: child(args, name, args.steps) for name in order}
        runs["ratio"] = runs["transcoder"]["activations_per_s"] / runs["sae"]["activations_per_s"]
        rounds.append(runs)
        print(
            f"  round {r + 1}: SAE {runs['sae']['activations_per_s']:,.0f} act/s, transcoder "
            f"{runs['transcoder']['activations_per_s']:,.0f} act/s: {runs['ratio']:.2f}x"
        )
    return {"rounds": rounds, "ratio": spread([r["ratio"] for r in rounds])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--only", nargs="+", choices=("sparsify", "sae", "clt"), default=["sparsify", "sae", "clt"]
    )
    p.add_argument("--sparsify-python", help="the Python of an environment with eai-sparsify 1.3.3")
    p.add_argument("--d", type=int, default=576)
    p.add_argument("--features", type=int, default=4096)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--atoms", type=int, default=4096)
    p.add_argument("--active", type=int, default=16, help="planted codes a row")
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--steps", type=int, default=142)
    p.add_argument("--pool-rows", type=int, default=65536)
    p.add_argument("--heldout-rows", type=int, default=8192)
    p.add_argument("--clt-layers", type=int, default=30)
    p.add_argument("--clt-d", type=int, default=64)
    p.add_argument("--clt-features", type=int, default=512)
    p.add_argument("--clt-steps", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--worker-steps", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        if args.worker == "sparsify":
            result = sparsify_worker(args, args.worker_steps)
        elif args.worker == "clt":
            result = clt_worker(args)
        else:
            result = interp_worker(args, args.worker_steps, args.worker)
        result.update(threads=torch.get_num_threads(), torch=torch.__version__)
        print(json.dumps(result))
        return
    if "sparsify" in args.only and not args.sparsify_python:
        p.error(
            "--sparsify-python is needed for --only sparsify: the Python of an environment with eai-sparsify"
        )
    others = (
        {args.sparsify_python: ["eai-sparsify", "schedulefree", "torch"]} if "sparsify" in args.only else None
    )
    env = provenance.environment(others=others)
    results: dict = {"args": vars(args)}
    if "sparsify" in args.only:
        print(f"against sparsify: d={args.d}, {args.features} features, k={args.k}, batch {args.batch_size}, "
              f"{args.steps} steps, {args.threads} thread(s)")  # fmt: skip
        results["sparsify"] = against_sparsify(args)
        print(f"  median speed ratio {results['sparsify']['speed_ratio']['median']:.2f}x")
    if "sae" in args.only:
        print(f"transcoder against SAE: same width, {args.steps} steps")
        results["sae"] = against_sae(args)
        print(f"  median ratio {results['sae']['ratio']['median']:.2f}x")
    if "clt" in args.only:
        clt = child(args, "clt", 0)
        clt["ratio"] = spread([r["ratio"] for r in clt["rounds"]])
        results["clt"] = clt
        ratios = [round(r["ratio"], 2) for r in clt["rounds"]]
        print(f"CLT: {args.clt_layers} layers, d={args.clt_d}, {args.clt_features} features a layer: step over "
              f"cost model {ratios}, median {clt['ratio']['median']:.2f}x")  # fmt: skip
    print(f"load average at start {env['load_start'][0]:.2f}, at end {os.getloadavg()[0]:.2f}")
    if args.out:
        provenance.write_run(args.out, results, env)


if __name__ == "__main__":
    main()
