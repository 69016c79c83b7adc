"""Lorsa training: interp's trainer against llamascopium's (OpenMOSS, formerly lm-saes) on the same activations
and settings: held-out fraction of variance unexplained and throughput.

The activations are a real model's: SmolLM2-135M (``--model``) reading the project's own documentation (README
and ``docs/*.md``, cut into windows of ``--context`` tokens, the last ``--held-out`` windows held out), the input
of layer ``--layer``'s attention (``ln1.hook_normalized``) and its output (``hook_attn_out``), written once to a
file both sides read (its hash is recorded). Both train a TopK Lorsa of ``--heads`` heads sharing ``--qk-heads``
QK heads of ``--qk-dim`` (the model's rotary settings: rotate-half pairs, its base), ``k = --k``, on batches of
``--batch-size`` tokens (whole windows), for ``--steps`` steps over the same training windows the same number of
times (each side in its own seeded order), with Adam at ``--lr``, a 5% warm-up and AuxK (1/32, the ``d_model /
2`` strongest dead heads, a head counting as dead after ``--dead-after`` tokens without firing: a quarter of the
run by default, interp's default), each library's own recipe otherwise:

- interp: :func:`interp.sae.train` with ``kind="lorsa"`` and ``qk_init="random"`` (llamascopium's initial QK needs
  a TransformerLens model): unit-norm output directions, inputs and outputs scaled to mean norm ``sqrt(d)``,
  a linear decay over the last fifth;
- llamascopium: ``LowRankSparseAttention.init_parameters`` and ``Trainer.fit`` on a stream of batches
  ``{hook_in, hook_out, tokens, mask}``, its dataset-wise normalisation (the norms measured on the training
  windows, as its initializer does), heads chosen by ``z * |W_O|`` (its default), ``amp_dtype`` float32 (its
  bfloat16 autocast is for GPUs), its per-step metrics off (``skip_metrics_calculation``: faster than its
  default, so the comparison is the stricter for interp), no schedule of k (interp has none).

Each side runs in a child process on ``--threads`` threads (llamascopium in its reference environment,
``--llamascopium-python``, built by ``python -m tests.reference_envs llamascopium``); the time is that of the
training call alone (the model and data loaded before, and an optimizer made once beforehand, so that neither
side's time holds the one-time import of ``torch._dynamo`` that torch's first ``Adam`` makes: about ten seconds).
Both the processor time of the call (``time.process_time``: the work done, which a machine shared with other
jobs does not inflate) and its wall time are recorded; the throughput ratio is read from processor time, the
wall-time ratio stored beside it. Held-out FVU is computed here for both, from each side's
reconstruction of the held-out windows: squared error over the outputs' variance about their mean. With
``--rounds`` above one the two sides alternate order each round; each figure is the median of the rounds.

    python benchmarks/lorsa.py --llamascopium-python ~/.cache/interp-tests/venv-llamascopium-*/bin/python \\
        --threads 1 --out benchmarks/results/lorsa.json

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def prepare(args: argparse.Namespace, folder: Path) -> dict:
    """Cache the layer's attention input and output on the documentation's windows into ``folder/data``."""
    from safetensors.torch import save_file

    import interp

    model = interp.load(args.model)
    texts = [(ROOT / "README.md").read_text()] + [p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))]
    ids = torch.cat([model.to_tokens(t).ids[0] for t in texts])
    n = ids.numel() // args.context
    windows = ids[: n * args.context].reshape(n, args.context)
    need = args.held_out + args.train_windows
    if n < need:
        raise SystemExit(f"the documentation has {n} windows of {args.context} tokens; {need} are asked for")
    windows = windows[torch.randperm(n, generator=torch.Generator().manual_seed(0))[:need]]
    hooks = [f"blocks.{args.layer}.ln1.hook_normalized", f"blocks.{args.layer}.hook_attn_out"]
    xs, ys = [], []
    with torch.no_grad():
        for start in range(0, need, 16):
            batch = windows[start : start + 16]  # the blocks after the layer are not run
            _, cache = model.run_with_cache(batch, names_filter=hooks, stop_at_layer=args.layer + 1)
            xs.append(cache[hooks[0]])
            ys.append(cache[hooks[1]])
    x, y = torch.cat(xs).contiguous(), torch.cat(ys).contiguous()
    data = folder / "data.safetensors"
    save_file({"x": x, "y": y}, str(data))
    cfg = model.cfg
    return {
        "data": str(data),
        "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "d_model": cfg.d_model,
        "rotary_base": cfg.rotary_base,
        "rotary_dim": cfg.rotary_dim,
        "n_ctx": cfg.n_ctx,
        "n_heads": cfg.n_heads,
        "windows": need,
    }


def schedule(args: argparse.Namespace) -> list[list[int]]:
    """The training windows of each step: every side reads the same, in the same order."""
    per_step = args.batch_size // args.context
    order = []
    g = torch.Generator().manual_seed(args.seed)
    while len(order) < args.steps * per_step:
        order += torch.randperm(args.train_windows, generator=g).tolist()
    return [order[i * per_step : (i + 1) * per_step] for i in range(args.steps)]


def dead_after(args: argparse.Namespace) -> int:
    """Tokens without firing after which a head counts as dead, on both sides."""
    return args.dead_after if args.dead_after is not None else args.steps * args.batch_size // 4


def interp_worker(args: argparse.Namespace, spec: dict) -> dict:
    from safetensors.torch import load_file

    import interp
    from interp.sae import train

    model = interp.load(args.model)
    data = load_file(spec["data"])
    x, y = data["x"][: args.train_windows], data["y"][: args.train_windows]
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # torch's one-time import, out of the time
    start, cpu = time.perf_counter(), time.process_time()
    lorsa = train(
        (x, y),
        kind="lorsa",
        model=model,
        layers=[args.layer],
        d_sae=args.heads,
        k=args.k,
        n_qk_heads=args.qk_heads,
        d_qk_head=args.qk_dim,
        qk_init="random",
        lr=args.lr,
        batch_size=args.batch_size,
        tokens=args.steps * args.batch_size,
        warmup_steps=max(1, args.steps // 20),
        dead_after_tokens=dead_after(args),
        buffer_rows=x.shape[0] * args.context,
        progress=False,
        seed=args.seed,
    )
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    with torch.no_grad():
        held = lorsa.reconstruct({args.layer: data["x"][args.train_windows :]})[args.layer]
    dead = lorsa.metadata["training"]["history"][-1]["dead_fraction"]
    return {"seconds": seconds, "cpu_seconds": cpu, "held_out": held, "dead_fraction": dead}


def llamascopium_worker(args: argparse.Namespace, spec: dict) -> dict:
    from llamascopium.models.lorsa import LorsaConfig, LowRankSparseAttention
    from llamascopium.trainer import Trainer, TrainerConfig
    from safetensors.torch import load_file

    data = load_file(spec["data"])
    x, y = data["x"][: args.train_windows], data["y"][: args.train_windows]
    hook_in, hook_out = f"blocks.{args.layer}.ln1.hook_normalized", f"blocks.{args.layer}.hook_attn_out"
    d = spec["d_model"]
    cfg = LorsaConfig(
        d_model=d,
        expansion_factor=(args.heads + 0.5) / d,
        hook_point_in=hook_in,
        hook_point_out=hook_out,
        n_qk_heads=args.qk_heads,
        d_qk_head=args.qk_dim,
        rotary_dim=min(spec["rotary_dim"], args.qk_dim),
        rotary_base=int(spec["rotary_base"]),
        rotary_adjacent_pairs=False,
        n_ctx=spec["n_ctx"],
        act_fn="topk",
        top_k=args.k,
    )
    torch.manual_seed(args.seed)
    lorsa = LowRankSparseAttention(cfg)
    lorsa.init_parameters()
    lorsa.set_dataset_average_activation_norm(
        {hook_in: float(x.norm(dim=-1).mean()), hook_out: float(y.norm(dim=-1).mean())}
    )
    steps = schedule(args)

    def stream():  # the trainer reads one batch to size its run before it starts: the first comes twice
        for windows in steps[:1] + steps:
            index = torch.tensor(windows)
            tokens = torch.zeros(len(windows), args.context, dtype=torch.long)
            yield {hook_in: x[index], hook_out: y[index], "tokens": tokens, "mask": torch.ones_like(tokens)}

    with tempfile.TemporaryDirectory() as results:
        trainer = Trainer(
            TrainerConfig(
                lr=args.lr,
                lr_warm_up_steps=max(1, args.steps // 20),
                lr_cool_down_steps=0.2,
                auxk_coefficient=1 / 32,
                k_aux=d // 2,
                dead_threshold=dead_after(args),
                amp_dtype=torch.float32,
                total_training_tokens=args.steps * args.batch_size,
                log_frequency=args.steps,
                skip_metrics_calculation=True,
                k_warmup_steps=0,
                n_checkpoints=0,
                exp_result_path=results,
            )
        )
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # torch's one-time import, out of the time
        start, cpu = time.perf_counter(), time.process_time()
        trainer.fit(lorsa, stream())
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        dead = float(trainer.is_dead.float().mean()) if trainer.is_dead is not None else 0.0
    with torch.no_grad():
        held = data["x"][args.train_windows :]
        f_in = lorsa.compute_norm_factor(held, hook_in)
        f_out = lorsa.compute_norm_factor(held, hook_out)
        out = lorsa.decode(lorsa.encode(held * f_in)) / f_out
    return {"seconds": seconds, "cpu_seconds": cpu, "held_out": out, "dead_fraction": dead}


def child(args: argparse.Namespace, worker: str, spec: dict, folder: Path) -> dict:
    """Run ``worker`` in its own process (llamascopium in its environment) and read what it wrote."""
    from safetensors.torch import load_file

    python = args.llamascopium_python if worker == "llamascopium" else sys.executable
    out = folder / f"{worker}.json"
    command = [
        python,
        "-W",
        "ignore",
        __file__,
        "--worker",
        worker,
        "--spec",
        json.dumps(spec),
        "--result",
        str(out),
    ]
    command += sys.argv[1:]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {worker} run failed:\n{done.stderr[-4000:]}")
    result = json.loads(out.read_text())
    result["held_out"] = load_file(result["held_out"])["out"]
    return result


def fvu(out: torch.Tensor, y: torch.Tensor) -> float:
    y, out = y.double().flatten(0, 1), out.double().flatten(0, 1)
    return float((out - y).pow(2).sum() / (y - y.mean(0)).pow(2).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--layer", type=int, default=3)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--train-windows", type=int, default=512)
    parser.add_argument("--held-out", type=int, default=64)
    parser.add_argument("--heads", type=int, default=576)
    parser.add_argument("--qk-heads", type=int, default=9)
    parser.add_argument("--qk-dim", type=int, default=64)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--dead-after", type=int, default=None, help="tokens (default: a quarter of the run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--llamascopium-python", default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", choices=["interp", "llamascopium"], help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.batch_size % args.context:
        parser.error(f"--batch-size {args.batch_size} must be a multiple of --context {args.context}")
    if args.worker:
        from safetensors.torch import save_file

        run = interp_worker if args.worker == "interp" else llamascopium_worker
        result = run(args, json.loads(args.spec))
        tensors = Path(args.result).with_suffix(".safetensors")
        save_file({"out": result["held_out"].float().contiguous()}, str(tensors))
        record = {k: v for k, v in result.items() if k != "held_out"}
        Path(args.result).write_text(json.dumps({**record, "held_out": str(tensors)}))
        return
    if args.llamascopium_python is None:
        parser.error(
            "--llamascopium-python is required (python -m tests.reference_envs llamascopium builds it)"
        )
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import provenance
    from safetensors.torch import load_file

    env = provenance.environment(others={args.llamascopium_python: ["llamascopium", "transformer-lens"]})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec = prepare(args, folder)
        held_y = load_file(spec["data"])["y"][args.train_windows :]
        rounds = []
        for r in range(args.rounds):
            order = ["interp", "llamascopium"] if r % 2 == 0 else ["llamascopium", "interp"]
            got = {worker: child(args, worker, spec, folder) for worker in order}
            tokens = args.steps * args.batch_size
            row = {
                worker: {
                    "seconds": got[worker]["seconds"],
                    "cpu_seconds": got[worker]["cpu_seconds"],
                    "tokens_per_cpu_s": tokens / got[worker]["cpu_seconds"],
                    "tokens_per_s": tokens / got[worker]["seconds"],
                    "held_out_fvu": fvu(got[worker]["held_out"], held_y),
                    "dead_fraction": got[worker]["dead_fraction"],
                }
                for worker in order
            }
            ratio = row["interp"]["tokens_per_cpu_s"] / row["llamascopium"]["tokens_per_cpu_s"]
            row["throughput_ratio"] = ratio
            row["wall_ratio"] = row["interp"]["tokens_per_s"] / row["llamascopium"]["tokens_per_s"]
            row["fvu_difference"] = row["interp"]["held_out_fvu"] - row["llamascopium"]["held_out_fvu"]
            rounds.append(row)
            print(json.dumps(row, indent=1))
    results = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "worker", "spec", "result")},
        "data_sha256": spec["sha256"],
        "rounds": rounds,
        "throughput_ratio": statistics.median(r["throughput_ratio"] for r in rounds),
        "wall_ratio": statistics.median(r["wall_ratio"] for r in rounds),
        "interp_held_out_fvu": statistics.median(r["interp"]["held_out_fvu"] for r in rounds),
        "llamascopium_held_out_fvu": statistics.median(r["llamascopium"]["held_out_fvu"] for r in rounds),
    }
    print(json.dumps({k: v for k, v in results.items() if k != "rounds"}, indent=1))
    if args.out is not None:
        provenance.write_run(args.out, results, env)
    assert math.isfinite(results["throughput_ratio"])


if __name__ == "__main__":
    main()
