"""interp against nnsight 0.8 on two everyday jobs, on the same random SmolLM2-shaped weights.

- **cache**: every layer's residual stream (the output of each of the 30 blocks) for a batch of 4 prompts of 128
  random tokens: interp's ``run_with_cache(names_filter="blocks.*.hook_resid_post")``, nnsight's ``.save()`` of
  each decoder layer's output inside one ``trace``.
- **sweep**: activation patching, each layer's residual at one position: one clean run records every layer's
  residual, then 30 runs of the corrupted batch, run ``l`` writing the clean residual of layer ``l`` at position
  64 into the corrupted run and reading the last position's logit of one token (the metric), as a researcher
  writes it in each library: interp's ``model.hooks([(name, fn)])`` around a forward, nnsight's assignment to
  ``layers[l].output`` in a ``trace``.

Both also time the plain forward of the batch (interp's ``model(tokens)``; under nnsight the wrapped
``transformers`` model's own forward), so that each job's time can be split into the forward it must run and
what the library adds: a sweep is 31 forwards, so ``sweep / (31 x forward)`` is its cost beyond them.

Each library runs in a child process of its own (nnsight with ``--nnsight-python``, the interpreter of an
environment with ``nnsight==0.8.*``: ``python -m tests.reference_envs nnsight`` builds one), with ``--threads``
threads, each job timed once (wall time and the process's CPU time, which other work on the machine enters less)
after one untimed cache; ``--rounds`` rounds, one child per library each, in alternating order,
so that a round's ratios compare runs made within the same minutes. The figures are the medians over rounds, each
ratio the median of the rounds' ratios (interp's time over nnsight's), every round kept. Both sides' patched
metrics and cached residuals are checked equal (to 1e-4 of the largest value) before any time is reported.

    python benchmarks/nnsight_peer.py --nnsight-python PATH --threads 1 --rounds 4 \\
        --out benchmarks/results/nnsight-peer-cpu.json

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
BATCH, POS, PATCHED, TARGET = 4, 128, 64, 7  # the batch, the patched position, the token whose logit is read
JOBS = ("forward", "cache", "sweep")
FORWARDS = 31  # a sweep's forwards: the clean run and one patched run per layer of SmolLM2's 30


def build(folder: Path) -> None:
    """SmolLM2-135M's shape with random weights (``benchmarks/overhead.py``'s) and a word-level tokenizer."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.attribution import word_tokenizer
    from benchmarks.overhead import MODELS, build_hf

    spec = MODELS["smollm2-135m"]
    build_hf(spec, "sdpa").save_pretrained(folder)
    word_tokenizer(folder, spec["d_vocab"])


def batches(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The clean and the corrupted batch ``[4, 128]`` (seeded: both libraries read the same)."""
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (BATCH, POS), generator=g), torch.randint(
        0, vocab, (BATCH, POS), generator=g
    )


def interp_jobs(folder: Path) -> dict:
    """The three jobs with interp's API."""
    import interp

    model = interp.load(str(folder), device="cpu", dtype="float32")
    clean, corrupt = batches(model.cfg.d_vocab)
    names = [f"blocks.{layer}.hook_resid_post" for layer in range(model.cfg.n_layers)]

    def cache():
        _, c = model.run_with_cache(clean, names_filter="blocks.*.hook_resid_post")
        return torch.stack([c[n] for n in names])

    def sweep():
        _, c = model.run_with_cache(clean, names_filter="blocks.*.hook_resid_post")
        metric = []
        for name in names:

            def patch(x, hook, clean_x=c[name]):
                x[:, PATCHED] = clean_x[:, PATCHED]
                return x

            with model.hooks([(name, patch)]):
                metric.append(model(corrupt)[:, -1, TARGET])
        return torch.stack(metric)

    return {"forward": lambda: model(clean), "cache": cache, "sweep": sweep}


def nnsight_jobs(folder: Path) -> dict:
    """The three jobs with nnsight's API (run in nnsight's environment)."""
    from nnsight import LanguageModel

    model = LanguageModel(str(folder), dispatch=True)  # float32 on the CPU, as saved
    layers = model.model.layers
    clean, corrupt = batches(model.config.vocab_size)

    def resid(
        layer,
    ):  # a decoder layer's output: the hidden states, or a tuple led by them (older transformers)
        out = layer.output
        return out[0] if isinstance(out, tuple) else out

    # A trace's body runs apart from this frame: what it saves is appended to lists made outside it.
    def cache():
        saved = []
        with model.trace(clean):
            for layer in layers:
                saved.append(resid(layer).save())
        return torch.stack(saved)

    def sweep():
        saved, metric = [], []
        with model.trace(clean):
            for layer in layers:
                saved.append(resid(layer).save())
        for i, layer in enumerate(layers):
            with model.trace(corrupt):
                resid(layer)[:, PATCHED] = saved[i][:, PATCHED]
                metric.append(model.lm_head.output[:, -1, TARGET].save())
        return torch.stack(metric)

    return {"forward": lambda: model._module(clean).logits, "cache": cache, "sweep": sweep}


def worker(args: argparse.Namespace) -> None:
    """Time each job once (wall and CPU time) after an untimed cache, save its values, print the times as JSON."""
    torch.set_num_threads(args.threads)
    folder = Path(args.folder)
    jobs = (interp_jobs if args.worker == "interp" else nnsight_jobs)(folder)
    result, values = {}, {}
    with torch.inference_mode():
        jobs["cache"]()  # untimed: first-use costs (a sweep's runs are the same forwards and hooks)
        for name in JOBS:
            start, cpu = time.perf_counter(), time.process_time()
            values[name] = jobs[name]()
            result[name], result[f"{name}_cpu"] = time.perf_counter() - start, time.process_time() - cpu
    torch.save({k: v.float() for k, v in values.items() if k != "forward"}, folder / f"{args.worker}.pt")
    print(json.dumps(result))


def child(args: argparse.Namespace, which: str, folder: Path) -> dict:
    python = sys.executable if which == "interp" else args.nnsight_python
    cmd = [python, __file__, "--worker", which, "--folder", str(folder), "--threads", str(args.threads)]
    env = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(args.threads), "PATH": "/usr/bin:/bin",
           "HF_HUB_OFFLINE": "1", "HOME": os.environ.get("HOME", "/tmp")}  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {which} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_same(folder: Path) -> dict:
    """The largest difference of nnsight's cached residuals and patched metrics from interp's, over the largest
    value; stops on more than 1e-4."""
    ours, theirs = torch.load(folder / "interp.pt"), torch.load(folder / "nnsight.pt")
    diffs = {}
    for name in ("cache", "sweep"):
        a, b = ours[name], theirs[name]
        if a.shape != b.shape:
            raise RuntimeError(f"{name}: nnsight's values are {tuple(b.shape)}, interp's {tuple(a.shape)}")
        diffs[name] = float((a - b).abs().max() / a.abs().max())
        if diffs[name] > 1e-4:
            raise RuntimeError(f"{name}: nnsight's values differ from interp's by {diffs[name]:.1e}")
    return diffs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nnsight-python", help="the Python of an environment with nnsight 0.8")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--worker", choices=("interp", "nnsight"), help=argparse.SUPPRESS)
    p.add_argument("--folder", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    if not args.nnsight_python:
        p.error("--nnsight-python is needed: the interpreter of an environment with nnsight 0.8")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import provenance

    env = provenance.environment(
        ["transformers"], others={args.nnsight_python: ["nnsight", "transformers", "torch"]}
    )
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build(folder)
        for r in range(args.rounds):
            order = ("interp", "nnsight") if r % 2 == 0 else ("nnsight", "interp")
            got = {which: child(args, which, folder) for which in order}
            got["difference"] = check_same(folder)
            rounds.append(got)
            print(f"round {r + 1}: " + "; ".join(
                f"{job} interp {got['interp'][job]:.2f}s nnsight {got['nnsight'][job]:.2f}s "
                f"({got['interp'][job] / got['nnsight'][job]:.2f}x)" for job in JOBS), flush=True)  # fmt: skip
    keys = (*JOBS, *(f"{job}_cpu" for job in JOBS))  # wall and CPU time
    summary = {}
    for which in ("interp", "nnsight"):
        summary[which] = {key: statistics.median(r[which][key] for r in rounds) for key in keys}
        for t in ("", "_cpu"):  # each job over the forwards it runs, in wall and in CPU time
            summary[which][f"sweep_over_forwards{t}"] = statistics.median(
                r[which][f"sweep{t}"] / (FORWARDS * r[which][f"forward{t}"]) for r in rounds
            )
            summary[which][f"cache_over_forward{t}"] = statistics.median(
                r[which][f"cache{t}"] / r[which][f"forward{t}"] for r in rounds
            )
    ratios = {key: [r["interp"][key] / r["nnsight"][key] for r in rounds] for key in keys}
    summary["ratios"] = {key: statistics.median(v) for key, v in ratios.items()}
    summary["round_ratios"] = ratios
    for job in JOBS:
        v, c = ratios[job], ratios[f"{job}_cpu"]
        print(f"{job}: interp {summary['interp'][job]:.2f}s, nnsight {summary['nnsight'][job]:.2f}s, "
              f"{summary['ratios'][job]:.2f}x [{min(v):.2f}-{max(v):.2f}]; CPU time "
              f"{summary['ratios'][f'{job}_cpu']:.2f}x [{min(c):.2f}-{max(c):.2f}]")  # fmt: skip
    for which in ("interp", "nnsight"):
        w = summary[which]
        print(f"{which}: sweep {w['sweep_over_forwards']:.2f}x its {FORWARDS} forwards (CPU time "
              f"{w['sweep_over_forwards_cpu']:.2f}x), cache {w['cache_over_forward']:.2f}x its forward (CPU time "
              f"{w['cache_over_forward_cpu']:.2f}x)")  # fmt: skip
    if args.out:
        figures = {"threads": args.threads, "rounds": rounds, "batch": [BATCH, POS], "summary": summary}
        provenance.write_run(args.out, figures, env)


if __name__ == "__main__":
    main()
