"""SAE training throughput and memory, and what a spliced SAE costs a forward pass.

Training: the same activations (``--rows`` rows of width ``--d-in``: sparse sums of random unit atoms plus
noise, made from a seed) are trained on for ``--steps`` steps of ``--batch-size`` rows by

- ``interp``: :func:`interp.sae.train` on the tensor;
- ``interp-store``: :func:`interp.sae.train` on an activation store of the same rows (``--shard-rows`` a
  shard), streaming through a buffer of ``--buffer-rows``;
- ``minimal``: a plain PyTorch TopK loop written below (encode, top-k, decode, MSE, Adam, unit-norm decoder
  rows; no dead-latent loss, no checkpoints, no shuffling buffer), the floor for the same arithmetic;
- ``saelens`` (with ``--saelens-python`` naming a Python that has ``sae-lens`` installed, e.g. a separate
  venv made with ``python -m venv VENV && VENV/bin/pip install sae-lens``): SAELens's own
  ``TopKTrainingSAE.training_forward_pass`` and Adam on the same batches (checked with sae-lens 6.54).

- ``transcoder``: :func:`interp.sae.train` of a transcoder on one layer of the same width (inputs the rows,
  outputs another seed's rows), the transcoder row against the SAE trainer's;

Cross-layer: over ``--tc-layers`` layers (``--tc-rows`` rows of width ``--tc-d-model`` per layer, ``--tc-d``
features per layer, ``--tc-steps`` steps), ``per-layer`` trains one transcoder per layer and ``clt`` a
cross-layer transcoder on the same rows; the script prints each one's cost per token and the CLT's over the
per-layer set's.

Each runs in a fresh process, after two warm-up steps; the script prints activations per second, the ratio to
``minimal``, and the growth of peak resident memory over the process's state after the rows were made (for
``interp-store``, after the store was written and the rows freed, so it shows memory bounded by the buffer, not
by the store).

Splicing (``sae_splice.py``): a random-weight model (``--shape``) runs ``--batch`` x ``--pos`` tokens with no
SAE, with a TopK SAE spliced at every ``hook_resid_post`` without and with the error term, and with the error
term while caching the latents; the median over ``--rounds`` of each time over the plain forward's and over a
cost model's (the plain forward plus each SAE's bare encode and decode: see that module), measured in one
process, and each one's peak memory above baseline, measured in a process of its own.

    python benchmarks/sae.py --threads 1 --rows 20000 --steps 20 --d-sae 1024   # tiny settings
    python benchmarks/sae.py --threads 1 --only splice                          # splicing alone
    python benchmarks/sae.py --device cuda --rows 2000000 --d-in 768 --d-sae 24576 --k 32 --steps 400

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance
import sae_splice
import torch

SHAPES = {
    "small": dict(n_layers=4, d_model=256, n_heads=4, d_vocab=4096),
    "smollm2-135m": dict(
        n_layers=30, d_model=576, n_heads=9, n_kv_heads=3, d_mlp=1536, d_vocab=49152,
        norm="rmsnorm", positional="rotary", mlp="gated", act="silu", attn_bias=False, mlp_bias=False,
    ),
}  # fmt: skip


def peak_rss_mib() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def make_rows(rows: int, d_in: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    atoms = torch.randn(4 * d_in, d_in, generator=g)
    atoms /= atoms.norm(dim=-1, keepdim=True)
    out = torch.empty(rows, d_in)
    for start in range(0, rows, 8192):
        n = min(8192, rows - start)
        idx = torch.randint(0, atoms.shape[0], (n, 8), generator=g)
        coef = torch.rand(n, 8, generator=g) * 3
        out[start : start + n] = (atoms[idx] * coef[..., None]).sum(1) + 0.1 * torch.randn(
            n, d_in, generator=g
        )
    return out


def minimal_topk(x: torch.Tensor, d_sae: int, k: int, batch: int, steps: int, lr: float, device: str) -> None:
    """The floor: a TopK SAE step with nothing else."""
    d_in = x.shape[1]
    g = torch.Generator().manual_seed(0)
    w_dec = torch.randn(d_sae, d_in, generator=g)
    w_dec = (w_dec / w_dec.norm(dim=-1, keepdim=True)).to(device).requires_grad_(True)
    w_enc = w_dec.detach().T.clone().requires_grad_(True)
    b_enc = torch.zeros(d_sae, device=device, requires_grad=True)
    b_dec = x[:4096].mean(0).to(device).requires_grad_(True)
    opt = torch.optim.Adam([w_enc, b_enc, w_dec, b_dec], lr=lr)
    for step in range(steps):
        start = (step * batch) % (x.shape[0] - batch + 1)
        xb = x[start : start + batch].to(device)
        pre = (xb - b_dec) @ w_enc + b_enc
        values, indices = pre.topk(k, dim=-1)
        acts = torch.zeros_like(pre).scatter(-1, indices, values.relu())
        loss = ((acts @ w_dec + b_dec - xb) ** 2).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            w_dec /= w_dec.norm(dim=-1, keepdim=True)
    if device.startswith("cuda"):
        torch.cuda.synchronize()


SAELENS_SCRIPT = r"""
import dataclasses, sys, time, json, resource, torch
from sae_lens.saes.topk_sae import TopKTrainingSAE, TopKTrainingSAEConfig
from sae_lens.saes.sae import TrainStepInput
FIELDS = {f.name for f in dataclasses.fields(TrainStepInput)}
def step_input(x, dead, step):
    kw = dict(sae_in=x, coefficients={}, dead_neuron_mask=dead, n_training_steps=step)
    if "is_logging_step" in FIELDS:  # added in later 6.x releases
        kw["is_logging_step"] = False
    return TrainStepInput(**kw)
sys.path.insert(0, sys.argv[1])
from sae import make_rows, peak_rss_mib
rows, d_in, d_sae, k, batch, steps, lr, device = json.loads(sys.argv[2])
torch.set_num_threads(int(sys.argv[3]))
x = make_rows(rows, d_in)
warm = TopKTrainingSAE(TopKTrainingSAEConfig(d_in=d_in, d_sae=d_sae, k=k, device=device)).to(device)
for step in range(2):
    out = warm.training_forward_pass(step_input(x[:batch].to(device), None, step))
    out.loss.backward()
del warm
base = peak_rss_mib()
sae = TopKTrainingSAE(TopKTrainingSAEConfig(d_in=d_in, d_sae=d_sae, k=k, device=device)).to(device)
opt = torch.optim.Adam(sae.parameters(), lr=lr)
dead = torch.zeros(d_sae, dtype=torch.bool, device=device)
t = time.perf_counter()
for step in range(steps):
    start = (step * batch) % (rows - batch + 1)
    out = sae.training_forward_pass(step_input(x[start:start + batch].to(device), dead, step))
    opt.zero_grad(set_to_none=True)
    out.loss.backward()
    opt.step()
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "rss_growth_mib": peak_rss_mib() - base}))
"""


def worker(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads or torch.get_num_threads())
    x = make_rows(args.rows, args.d_in)
    lr = 2e-4 / (args.d_sae / 2**14) ** 0.5
    folder = None
    source: object = x
    if args.worker == "interp-store":
        from interp import HookedTransformer, TransformerConfig
        from interp.store import cache_activations

        folder = Path(tempfile.mkdtemp(prefix="sae-bench-"))
        # A one-layer model whose stream at hook_embed is the rows themselves: embeddings are the rows.
        cfg = TransformerConfig(n_layers=1, d_model=args.d_in, n_heads=1, d_vocab=args.rows, n_ctx=64, seed=0)
        model = HookedTransformer(cfg).eval()
        with torch.no_grad():
            model.embed.W_E.copy_(x)
        ids = (
            torch.arange(args.rows).reshape(-1, 64) if args.rows % 64 == 0 else torch.arange(args.rows)[None]
        )
        source = cache_activations(
            model, list(ids.split(16)), "hook_embed", folder, shard_rows=args.shard_rows, progress=False
        )
        del model, x
    # Warm up (the first Adam step and top-k of a process pay a one-off setup of several seconds on a CPU).
    warm = make_rows(2 * args.batch_size, args.d_in, seed=1)
    minimal_topk(warm, args.d_sae, args.k, args.batch_size, 2, lr, args.device)
    if args.worker != "minimal":
        from interp.sae.training import train

        train(
            warm,
            d_sae=args.d_sae,
            k=args.k,
            batch_size=args.batch_size,
            tokens=2 * args.batch_size,
            progress=False,
        )
    del warm
    base = peak_rss_mib()
    start = time.perf_counter()
    if args.worker == "minimal":
        minimal_topk(x, args.d_sae, args.k, args.batch_size, args.steps, lr, args.device)
    else:
        from interp.sae.training import train

        train(
            source, d_sae=args.d_sae, k=args.k, batch_size=args.batch_size, tokens=args.steps * args.batch_size,
            lr=lr, progress=False, buffer_rows=args.buffer_rows, init_rows=min(16384, args.rows),
        )  # fmt: skip
    seconds = time.perf_counter() - start
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"seconds": seconds, "rss_growth_mib": peak_rss_mib() - base}))


def transcoder_worker(args: argparse.Namespace) -> None:
    """One transcoder training run in this process: ``transcoder`` (one layer, the SAE's width) or, over
    ``--tc-layers`` layers, ``per-layer`` or ``clt``."""
    from interp.sae.training import train

    torch.set_num_threads(args.threads or torch.get_num_threads())
    if args.worker == "transcoder":
        rows, layers, d, features, steps = args.rows, 1, args.d_in, args.d_sae, args.steps
    else:
        rows, layers, d, features, steps = (
            args.tc_rows,
            args.tc_layers,
            args.tc_d_model,
            args.tc_d,
            args.tc_steps,
        )
    kind = "clt" if args.worker == "clt" else "transcoder"
    x = make_rows(rows * layers, d).reshape(rows, layers, d)
    y = make_rows(rows * layers, d, seed=2).reshape(rows, layers, d)
    kw = dict(kind=kind, d_sae=features, k=args.k, batch_size=args.batch_size, progress=False)
    train((x[: 2 * args.batch_size], y[: 2 * args.batch_size]), tokens=2 * args.batch_size, **kw)
    base = peak_rss_mib()
    start = time.perf_counter()
    train(
        (x, y), tokens=steps * args.batch_size, buffer_rows=args.buffer_rows, init_rows=min(16384, rows), **kw
    )
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss_growth_mib": peak_rss_mib() - base, "steps": steps}))


def run_variant(name: str, args: argparse.Namespace) -> dict:
    if name == "saelens":
        settings = [args.rows, args.d_in, args.d_sae, args.k, args.batch_size, args.steps,
                    2e-4 / (args.d_sae / 2**14) ** 0.5, args.device]  # fmt: skip
        cmd = [args.saelens_python, "-c", SAELENS_SCRIPT, str(Path(__file__).parent), json.dumps(settings),
               str(args.threads or 1)]  # fmt: skip
    else:
        cmd = [sys.executable, __file__, "--worker", name, *sys.argv[1:]]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {
            "error": done.stderr.strip().splitlines()[-1]
            if done.stderr.strip()
            else f"exit {done.returncode}"
        }
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["activations_per_s"] = result.get("steps", args.steps) * args.batch_size / result["seconds"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200000)
    parser.add_argument("--d-in", type=int, default=576)
    parser.add_argument("--d-sae", type=int, default=4096)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--shard-rows", type=int, default=8192)
    parser.add_argument("--buffer-rows", type=int, default=65536)
    parser.add_argument(
        "--shape", choices=sorted(SHAPES), default="small", help="model for the splice timing"
    )
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--pos", type=int, default=128)
    parser.add_argument("--splice-d-sae", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--saelens-python", default=None, help="a Python with sae-lens installed")
    parser.add_argument("--tc-layers", type=int, default=30, help="layers of the CLT row")
    parser.add_argument("--tc-rows", type=int, default=8192)
    parser.add_argument("--tc-d-model", type=int, default=64)
    parser.add_argument("--tc-d", type=int, default=512, help="features per layer of the CLT row")
    parser.add_argument("--tc-steps", type=int, default=10)
    parser.add_argument("--only", choices=("all", "training", "splice"), default="all", help="what to run")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--splice-variant", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help="write the numbers as JSON here")
    args = parser.parse_args()
    if args.worker in ("transcoder", "per-layer", "clt"):
        transcoder_worker(args)
        return
    if args.worker == "splice":
        sae_splice.memory_worker(args, SHAPES, peak_rss_mib)
        return
    if args.worker:
        worker(args)
        return
    others = {args.saelens_python: ["sae-lens", "torch"]} if args.saelens_python else None
    env = provenance.environment(others=others)
    training, cross = training_rows(args) if args.only != "splice" else ({}, {})
    splicing = sae_splice.report(args, SHAPES, __file__) if args.only != "training" else {}
    if args.out:
        figures = {"training": training, "cross_layer": cross, "splicing": splicing, "args": vars(args)}
        provenance.write_run(args.out, figures, env)


def training_rows(args: argparse.Namespace) -> tuple[dict, dict]:
    """Train each variant in a process of its own and print the rows; returns (training, cross-layer)."""
    names = ["minimal", "interp", "interp-store", "transcoder"] + (["saelens"] if args.saelens_python else [])
    training = {name: run_variant(name, args) for name in names}
    floor = training["minimal"].get("activations_per_s")
    print(f"training: {args.rows} rows x d_in={args.d_in}, d_sae={args.d_sae}, k={args.k}, batch {args.batch_size}, "
          f"{args.steps} steps, {args.threads or torch.get_num_threads()} thread(s), {args.device}")  # fmt: skip
    for name, r in training.items():
        if "error" in r:
            print(f"  {name:14s} failed: {r['error']}")
            continue
        ratio = r["activations_per_s"] / floor if floor else float("nan")
        print(f"  {name:14s} {r['activations_per_s']:12,.0f} activations/s  ({ratio:.2f} x minimal)  "
              f"peak memory +{r['rss_growth_mib']:.0f} MiB")  # fmt: skip
    cross = {name: run_variant(name, args) for name in ("per-layer", "clt")}
    print(f"cross-layer: {args.tc_layers} layers, {args.tc_rows} rows x d_model={args.tc_d_model}, "
          f"{args.tc_d} features a layer, k={args.k}, {args.tc_steps} steps")  # fmt: skip
    for name, r in cross.items():
        if "error" in r:
            print(f"  {name:14s} failed: {r['error']}")
            continue
        r["us_per_token"] = r["seconds"] / (args.tc_steps * args.batch_size) * 1e6
        print(
            f"  {name:14s} {r['us_per_token']:10.1f} us a token  peak memory +{r['rss_growth_mib']:.0f} MiB"
        )
    if all("error" not in r for r in cross.values()):
        print(f"  clt / per-layer: {cross['clt']['us_per_token'] / cross['per-layer']['us_per_token']:.2f} x")
    return training, cross


if __name__ == "__main__":
    main()
