"""Dashboards of every feature: the pass against the forward passes and encodes it needs, its peak memory at two
token counts, and SAEDashboard 0.8 on the same SAELens SAE and the same tokens. Ratios measured in one run.

**Transcoders** (``--part transcoders``): a SmolLM2-shaped random checkpoint (30 layers, d_model 576) with
random per-layer transcoders of ``--d-transcoder`` features, about 1% active (``benchmarks/attribution.py``
builds both), and texts of random words, ``--seq-len`` tokens each with the special token first.

- Cost model: the pass runs the forward up to the last block a transcoder reads, encodes every token at every
  layer, then for each layer's activations ``[tokens, features]`` makes one comparison pass (which fire) and
  works on the active (token, feature) pairs only (counts, extremes, histogram bins, one key each), plus a
  window copy for each offer that enters the top or sample table (many at first, then fewer: a table of ``k``
  keeps a new token with probability about ``k / seen``). Counted: the forward's and the encodes' matmul
  FLOPs, the active pairs and the entries, per token.
- Measured in one process, alternating: ``forward`` (the same batches, no hooks), ``forward + encodes`` (the
  same forward with a hook at each input hook that encodes its rows and drops them: the baseline), and the
  ``pass`` (:func:`interp.sae.dashboards.collect`); ``--repeats`` rounds, the median of each, in wall time and
  in the process's CPU time (which a busy machine's other work does not enter, one thread being used). The
  pass over the baseline is the ratio the target (at most 1.3) is about; so is the ratio between the two
  token counts (the cost of the tokens in between), which leaves out the one-time cost of filling the
  tables. Then once: the records of every feature and their files (a fixed cost, independent of the tokens).
- Peak memory: the largest resident set (anonymous memory: weights mapped from their file left out) during one
  more, untimed pass minus that before it (with the heap's free pages handed back first, so that the start
  holds nothing freed), in a fresh process for each of ``--tokens`` (two counts).

**SAEDashboard** (``--part saedashboard --saed-python PATH``): a GPT-2-shaped random checkpoint (``--sae-layers``
layers, d_model 768) and one SAELens-format SAE of ``--d-sae`` features at ``blocks.L.hook_resid_post``, saved
once and read by both; the same token ids. SAEDashboard runs in a child process of its own environment (it pins
``transformer-lens<3``, ``sae-lens>=6.8,<7``, ``transformers<4.57``): its ``SaeVisRunner`` over every feature,
with a layout of what a dashboard here holds (activation histogram, logit table, top and quantile examples),
on a TransformerLens model built from the same weights. interp runs ``write_dashboards`` (the pass, every
feature's record and file). Wall time of each call, after an untimed warm-up call on a few tokens.

    python benchmarks/dashboards.py --part transcoders --tokens 2048,8192 --out benchmarks/results/dashboards-cpu.json
    python benchmarks/dashboards.py --part saedashboard --saed-python PATH --out ...
    python benchmarks/dashboards.py --size tiny --tokens 256,512 --repeats 1        # a check that it runs

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def texts(n_items: int, seq_len: int, vocab: int, seed: int = 0) -> list[str]:
    """Texts of ``seq_len - 1`` random words each (the special token makes ``seq_len``)."""
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(3, vocab, (n_items, seq_len - 1), generator=g)
    return [" ".join(f"w{int(w)}" for w in row) for row in words]


def matmul_flops(model, tc, seq_len: int) -> dict[str, float]:
    """FLOPs per token of the forward up to the last block read (projections, scores and mixing at the mean
    position, MLP) and of the encodes."""
    c = model.cfg
    d, kv = c.d_model, c.n_kv_heads * c.d_head
    layers = max(tc.layers) + 1
    attention = 2 * d * (c.n_heads * c.d_head + 2 * kv) + 2 * c.n_heads * c.d_head * d
    scores = 2 * 2 * c.n_heads * c.d_head * (seq_len + 1) / 2
    mlp = 2 * 3 * d * c.d_mlp
    return {
        "forward": layers * (attention + scores + mlp),
        "encodes": len(tc.layers) * 2 * d * tc.d_transcoder,
    }


def transcoder_worker(args: argparse.Namespace) -> None:
    """One token count: forward, forward + encodes and the pass, alternating; then records and files."""
    from safetensors.torch import load_file

    import interp
    from benchmarks.circuits import PeakRSS
    from interp.allocator import heap_trim
    from interp.sae import TranscoderSet
    from interp.sae.dashboards import Data, collect
    from interp.sae.dashboards.folder import DashboardFolder
    from interp.sae.dashboards.sources import CorpusSource
    from interp.sae.dashboards.write import write_files

    torch.set_num_threads(args.threads)
    folder = Path(args.folder)
    model = interp.load(str(folder), dtype="float32")
    w = load_file(str(folder / "transcoders.safetensors"))
    tc = TranscoderSet(w["W_enc"], w["W_dec"], w["b_enc"], w["b_dec"])
    data = texts(args.n_tokens // args.seq_len, args.seq_len, model.cfg.d_vocab)
    source = CorpusSource(model, {layer: tc.input_hook(layer) for layer in tc.layers}, data, args.batch_size)

    def plain():
        with torch.no_grad():
            for _, _, ids, mask in source._batches(0):
                model(ids, mask, stop_at_layer=source.stop)

    def baseline():
        for batch in source.batches({}):
            batch.feed(lambda layer, x: tc.encode(x, layer))

    collect(
        model, tc, Data(texts=data[:2], batch_size=args.batch_size)
    )  # untimed: lazy imports, first kernels
    names = ("forward", "forward_encodes", "pass")
    times, cpu = {n: [] for n in names}, {n: [] for n in names}

    def dashboards():
        return collect(model, tc, Data(texts=data, batch_size=args.batch_size))

    for _ in range(args.repeats):
        for name, fn in (("forward", plain), ("forward_encodes", baseline), ("pass", dashboards)):
            start, clock = time.perf_counter(), time.process_time()
            collected = fn()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - clock)
    trim = heap_trim()
    if trim is not None:
        trim(0)  # the start holds no memory the timed runs freed, which the pass would reuse unseen
    with PeakRSS(anonymous=True) as rss:  # apart from the timed runs: its sampling thread costs time
        collected = dashboards()
    peak = rss.peak - rss.start
    c = collected.collector
    with tempfile.TemporaryDirectory() as tmp:
        out = DashboardFolder(tmp, "bench")
        out.root.mkdir(parents=True)
        start = time.perf_counter()
        write_files(
            c, model, tc, collected.texts, out, {"dictionary": {"kind": "transcoders"}, "settings": {}}
        )
        records = time.perf_counter() - start
    row = {"n_tokens": c.n_tokens, "n_features": c.n, "records_seconds": records, "peak_mib": peak}
    if args.repeats:
        median = {k: statistics.median(v) for k, v in times.items()}
        median_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        row.update({
            "seconds": times, "cpu_seconds": cpu, "median": median, "median_cpu": median_cpu,
            "pass_over_forward_encodes": median["pass"] / median["forward_encodes"],
            "pass_over_forward_encodes_cpu": median_cpu["pass"] / median_cpu["forward_encodes"],
            "encodes_share": (median_cpu["forward_encodes"] - median_cpu["forward"]) / median_cpu["forward_encodes"],
        })  # fmt: skip
    print(json.dumps({
        **row,
        "table_mib": sum(t.numel() * t.element_size() for t in c.state().values()) / 2**20,
        "flops_per_token": matmul_flops(model, tc, args.seq_len),
        "active_pairs_per_token": c.n_active / c.n_tokens,
        "entered_per_token": (c.top.entered + c.sample.entered) / c.n_tokens,
    }))  # fmt: skip


def sae_build(folder: Path, n_layers: int, d_sae: int, layer: int) -> None:
    """A GPT-2-shaped random checkpoint with a word-level tokenizer, and a SAELens-format SAE at
    ``blocks.{layer}.hook_resid_post`` with about 1% of its features active."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    import interp
    from interp.sae import SAE, SAEConfig, save

    cfg = transformers.GPT2Config(vocab_size=8192, n_positions=256, n_embd=768, n_layer=n_layers, n_head=12,
                                  bos_token_id=0, eos_token_id=1, pad_token_id=2)  # fmt: skip
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(folder / "model")
    words = ["<bos>", "<eos>", "<pad>"] + [f"w{i}" for i in range(3, cfg.vocab_size)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    ).save_pretrained(folder / "model")
    config = json.loads((folder / "model" / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (folder / "model" / "tokenizer_config.json").write_text(json.dumps(config))
    model = interp.load(str(folder / "model"))
    hook = f"blocks.{layer}.hook_resid_post"
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, cfg.vocab_size, (8, 64), generator=g)
    _, cache = model.run_with_cache(ids, names_filter=hook)
    x = cache[hook].reshape(-1, 768)
    sae = SAE(SAEConfig(d_in=768, d_sae=d_sae, hook_name=hook, architecture="standard"))
    with torch.no_grad():
        sae.W_enc.copy_(torch.randn(768, d_sae, generator=g) / x.norm(dim=-1).mean())
        pre = x @ sae.W_enc
        sae.b_enc.copy_(-pre.quantile(0.99, dim=0))  # each feature fires on about 1% of tokens
        sae.W_dec.copy_(torch.randn(d_sae, 768, generator=g) / math.sqrt(768))
    save(sae, folder / "sae")


def interp_sae_worker(args: argparse.Namespace) -> None:
    """interp's dashboards of every feature of the SAE: the pass, the records and their files."""
    import interp
    from benchmarks.dashboards_peer import sae_tokens
    from interp.sae import load
    from interp.sae.dashboards import Data, Settings, write_dashboards

    torch.set_num_threads(args.threads)
    folder = Path(args.folder)
    model = interp.load(str(folder / "model"), dtype="float32")
    sae = load(folder / "sae")
    ids = sae_tokens(args.n_tokens, args.seq_len)
    data = [(ids[i : i + args.batch_size], torch.ones_like(ids[i : i + args.batch_size]))
            for i in range(0, len(ids), args.batch_size)]  # fmt: skip
    settings = Settings(top=10, quantiles=5, per_quantile=4, before=16, after=4)
    with tempfile.TemporaryDirectory() as tmp:
        write_dashboards(model, sae, Path(tmp) / "warm", data[:1], scan="warm", settings=settings)
        start = time.perf_counter()
        done = write_dashboards(
            model, sae, Path(tmp) / "run", Data(texts=data, skip_first=0), scan="sae", settings=settings
        )
        seconds = time.perf_counter() - start
        index = json.loads((done.folder / "index.json").read_text())
    active = round(sum(r["density"] for r in index["features"]) * done.n_tokens)
    print(json.dumps({"seconds": seconds, "stages": dict(done.seconds), "n_tokens": done.n_tokens,
                      "n_features": done.n_features, "active_pairs": active, "torch": torch.__version__}))  # fmt: skip


def child(python: str, worker: str, **flags) -> dict:
    cmd = [
        python,
        __file__,
        "--worker",
        worker,
        *(x for k, v in flags.items() for x in (f"--{k.replace('_', '-')}", str(v))),
    ]
    threads = str(flags.get("threads", 1))
    env = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PATH": "/usr/bin:/bin",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        said = [
            line for line in done.stderr.splitlines() if "Warning" not in line and "warnings.warn" not in line
        ]
        raise RuntimeError(
            f"the {worker} worker failed (exit status {done.returncode}):\n" + "\n".join(said[-60:])
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def run_transcoders(args: argparse.Namespace) -> dict:
    from benchmarks.attribution import build

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), args.size, args.d_transcoder)
        for n in (int(x) for x in args.tokens.split(",")):
            load = load_average()
            row = child(sys.executable, "transcoders", folder=tmp, n_tokens=n, seq_len=args.seq_len,
                        batch_size=args.batch_size, repeats=args.repeats, threads=args.threads)  # fmt: skip
            row["uptime_before"] = load
            rows.append(row)
            if not args.repeats:
                print(
                    f"{row['n_tokens']} tokens: peak +{row['peak_mib']:.0f} MiB (tables {row['table_mib']:.0f} MiB)"
                )
                continue
            m = row["median"]
            print(
                f"{row['n_tokens']} tokens, {row['n_features']} features: forward {m['forward']:.1f}s, forward + "
                f"encodes {m['forward_encodes']:.1f}s, pass {m['pass']:.1f}s = {row['pass_over_forward_encodes']:.3f}x "
                f"(CPU time {row['pass_over_forward_encodes_cpu']:.3f}x); records and files "
                f"{row['records_seconds']:.1f}s; peak +{row['peak_mib']:.0f} MiB (tables "
                f"{row['table_mib']:.0f} MiB); {row['active_pairs_per_token']:.0f} active pairs and "
                f"{row['entered_per_token']:.2f} entries per token; load: {load}"
            )
    marginal = None
    if (
        len(rows) >= 2 and args.repeats
    ):  # the cost of the tokens between the two counts: the tables' one-time filling left out
        a, b = rows[0]["median_cpu"], rows[-1]["median_cpu"]
        marginal = (b["pass"] - a["pass"]) / (b["forward_encodes"] - a["forward_encodes"])
        print(f"between {rows[0]['n_tokens']} and {rows[-1]['n_tokens']} tokens: {marginal:.3f}x (CPU time)")
    return {"part": "transcoders", "size": args.size, "d_transcoder": args.d_transcoder, "seq_len": args.seq_len,
            "batch_size": args.batch_size, "threads": args.threads, "rows": rows,
            "marginal_pass_over_forward_encodes_cpu": marginal}  # fmt: skip


def run_saedashboard(args: argparse.Namespace) -> dict:
    if not args.saed_python:
        raise SystemExit(
            "--saed-python is needed: the interpreter of an environment with sae-dashboard==0.8.0"
        )
    with tempfile.TemporaryDirectory() as tmp:
        sae_build(Path(tmp), args.sae_layers, args.d_sae, args.sae_layer)
        flags = dict(folder=tmp, n_tokens=args.sae_tokens, seq_len=args.seq_len, batch_size=args.batch_size,
                     threads=args.threads)  # fmt: skip
        load = load_average()
        ours = child(sys.executable, "interp-sae", **flags)
        theirs = child(args.saed_python, "saedashboard", **flags)
    ratio = ours["seconds"] / theirs["seconds"]
    print(
        f"SAE of {args.d_sae} features, {ours['n_tokens']} tokens: interp {ours['seconds']:.1f}s, SAEDashboard "
        f"{theirs['seconds']:.1f}s: {ratio:.3f}x; load: {load}"
    )
    return {"part": "saedashboard", "d_sae": args.d_sae, "layers": args.sae_layers, "tokens": args.sae_tokens,
            "interp": ours, "saedashboard": theirs, "time_ratio": ratio, "uptime_before": load,
            "threads": args.threads}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("transcoders", "saedashboard"), default="transcoders")
    p.add_argument(
        "--tokens", default="2048,8192", help="token counts of the transcoder part (two, for memory)"
    )
    p.add_argument(
        "--size", choices=("tiny", "smollm2"), default="smollm2", help="tiny: a check that it runs"
    )
    p.add_argument("--d-transcoder", type=int, default=1024)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2, help="timed rounds; 0: memory only")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--saed-python", help="the Python of an environment with sae-dashboard==0.8.0")
    p.add_argument("--d-sae", type=int, default=4096)
    p.add_argument("--sae-layers", type=int, default=4)
    p.add_argument("--sae-layer", type=int, default=2)
    p.add_argument("--sae-tokens", type=int, default=4096)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--worker", choices=("transcoders", "interp-sae", "saedashboard"), help=argparse.SUPPRESS)
    p.add_argument("--folder", help=argparse.SUPPRESS)
    p.add_argument("--n-tokens", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker == "transcoders":
        return transcoder_worker(args)
    if args.worker == "interp-sae":
        return interp_sae_worker(args)
    if args.worker == "saedashboard":
        from benchmarks.dashboards_peer import saedashboard_worker

        return saedashboard_worker(args)
    peer = {args.saed_python: ["sae-dashboard", "sae-lens", "torch"]} if args.saed_python else None
    env = provenance.environment(others=peer)
    result = run_transcoders(args) if args.part == "transcoders" else run_saedashboard(args)
    if args.out:
        provenance.write_run(args.out, result, env)


if __name__ == "__main__":
    main()
