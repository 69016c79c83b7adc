"""Wall time and peak memory of one attribution graph: interp against both of circuit-tracer 0.5.0's backends.

Both build the graph of the same random checkpoint (Llama architecture; ``--size smollm2`` is SmolLM2-135M's
shape: 30 layers, d_model 576, 9 heads of which 3 key/value, d_mlp 1536, 49152 tokens; ``--size tiny`` a
2-layer model for a quick check) with the same random per-layer transcoders (``--d-transcoder`` features per
layer, about 1% active), for prompts of each ``--prompt-lengths`` and each ``--max-feature-nodes``. Norm gains
are 1, so circuit-tracer's ``mlp.hook_in`` and interp's ``ln2.hook_normalized`` hold the same tensor.

circuit-tracer runs with each of ``--backends``: ``transformerlens`` (its default: a ``HookedTransformer``
built from a hand-written ``HookedTransformerConfig`` with ``ReplacementModel.from_config``, the checkpoint's
weights converted by TransformerLens's own Llama converter, offline) and ``nnsight`` (the checkpoint read by
``from_pretrained_and_transcoders``). Each graph is made in a child process of its own (interp's in this
environment, circuit-tracer's with ``--ct-python``, the interpreter of an environment with
``circuit-tracer==0.5.0``, ``nnsight==0.6.*`` and ``transformer-lens``), with ``--threads`` threads; its wall
time is that of the ``attribute`` call (after an untimed graph of the first four tokens, so one-time costs
such as lazy imports are left out; the process's CPU time too, which other work on the machine enters less),
its peak memory the largest resident set during the call minus that before
it (on CUDA: ``torch.cuda.max_memory_allocated``). The script prints interp's time and memory over each
backend's for every case, measured in the same run (with ``--rounds N``: N rounds of one child per library,
the medians and every round's ratios), and checks that each backend's adjacency equals interp's
(``|A_backend - A_interp| <= 1e-4 max|A_interp|``, the golden tests' tolerance) where the matrix is at most
``--compare-max-nodes`` nodes a side.

    python benchmarks/attribution.py --ct-python PATH --size smollm2 --prompt-lengths 8,32 --threads 1
    python benchmarks/attribution.py --ct-python PATH                      # tiny: a check that it runs
    python benchmarks/attribution.py --size smollm2 --prompt-lengths 8 --explain-attention 20

With ``--explain-attention N`` only interp runs: after the timed graph, the same process times explaining the
``N`` strongest edges between positions of the pruned graph (their head loadings and the top three heads'
scores in graph nodes, :func:`interp.circuits.features.attention.explain_edges`) and prints that time over the
graph's.

With ``--max-memory-gb G1,G2,...`` only interp runs (``--size small`` is a 6-layer Llama of d_model 128, 4
heads of which 2 key/value, d_mlp 384, 2048 tokens): for each case one graph with the default reads per pass,
then one per budget (``attribute(..., max_memory_gb=G)``), each in a fresh child process; the peak is the
resident high-water mark (``VmHWM``, restarted before the call) above the resident set before it. It prints the
reads per pass the budget chose, the peak over the budget and over the memory model's estimate, and the largest
difference from the unbudgeted graph, and stops if a peak exceeds its budget (a refused budget is recorded with
its one-line message).

    python benchmarks/attribution.py --size small --d-transcoder 512 --prompt-lengths 256 \
        --max-feature-nodes 1024,0 --max-memory-gb 1.0,0.5,0.35,0.25

With ``--backends ''`` only interp runs, ``--rounds`` times, each graph in a fresh child process: the line gives
the least and largest peak over the runs and their spread (``--size medium``: 8 layers, d_model 256, 4 heads of
which 2 key/value, d_mlp 768, 2048 tokens; the case whose peak is followed run to run):

    python benchmarks/attribution.py --size medium --d-transcoder 2048 --prompt-lengths 24 --backends '' \
        --rounds 6 --threads 1

This is a measurement script, not a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance
import torch

ROOT = Path(__file__).resolve().parents[1]
SIZES = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=512),
    "small": dict(hidden_size=128, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=384, vocab_size=2048),
    "medium": dict(hidden_size=256, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=768, vocab_size=2048),
    "smollm2": dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                    intermediate_size=1536, vocab_size=49152),
}  # fmt: skip
ACTIVE = 0.01  # the share of features active at a position

BACKENDS = ("transformerlens", "nnsight")
"""circuit-tracer's backends: its default (by its own README the faster and leaner), then nnsight."""
MAX_POSITIONS = 1024  # the checkpoint's context: room for the long prompt


def build(folder: Path, size: str, d_transcoder: int) -> None:
    """A random checkpoint with a word-level tokenizer, and transcoder weights, in ``folder``."""
    import transformers
    from safetensors.torch import save_file

    cfg = transformers.LlamaConfig(**SIZES[size], max_position_embeddings=MAX_POSITIONS, bos_token_id=0, eos_token_id=1,
                                   pad_token_id=2, tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
    model.save_pretrained(folder)
    word_tokenizer(folder, cfg.vocab_size)
    g = torch.Generator().manual_seed(1)
    n, d, f = cfg.num_hidden_layers, cfg.hidden_size, d_transcoder
    threshold = math.sqrt(2) * torch.erfinv(torch.tensor(1 - 2 * ACTIVE)).item()
    save_file(
        {
            "W_enc": torch.randn(n, f, d, generator=g) / math.sqrt(d),
            "b_enc": torch.full((n, f), -threshold),
            "W_dec": torch.randn(n, f, d, generator=g) / math.sqrt(f * ACTIVE),
            "b_dec": torch.zeros(n, d),
        },
        str(folder / "transcoders.safetensors"),
    )


def word_tokenizer(folder: Path, vocab_size: int) -> None:
    """A word-level tokenizer of ``vocab_size`` words (``<bos>``, ``<eos>``, ``<pad>``, ``w3``, ...) in ``folder``,
    loadable by every ``transformers`` version."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<bos>", "<eos>", "<pad>"] + [f"w{i}" for i in range(3, vocab_size)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    ).save_pretrained(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # a class every transformers version has
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def worker(args: argparse.Namespace) -> None:
    """Make one graph and print its time and memory as JSON (runs in a child process)."""
    sys.path.insert(0, str(ROOT))
    from safetensors.torch import load_file

    from benchmarks.circuits import PeakRSS
    from tests.load.memory_probe import peak_bytes, reset_peak, resident_bytes

    torch.set_num_threads(args.threads)
    folder = Path(args.folder)
    w = load_file(str(folder / "transcoders.safetensors"), device=args.device)
    prompt = torch.tensor(
        [0] + [3 + (7 * i) % 400 for i in range(args.prompt_length - 1)], device=args.device
    )
    cap = args.max_feature_nodes or None
    if args.worker == "interp":
        import interp
        from interp.circuits import attribute
        from interp.sae import TranscoderSet

        model = interp.load(str(folder), device=args.device, dtype="float32")
        tc = TranscoderSet(w["W_enc"], w["W_dec"], w["b_enc"], w["b_dec"]).to(args.device)

        budget = args.max_memory_gb or None
        plans = _spy_on_plans() if budget else []

        def run(ids=prompt):
            return attribute(model, tc, ids, batch_size=args.batch_size, max_feature_nodes=cap,
                             max_memory_gb=budget, progress=False)  # fmt: skip
    else:
        from circuit_tracer import attribute

        model = circuit_tracer_model(folder, _ct_transcoders(w, args.device), args.worker, args.device)

        def run(ids=prompt):
            return attribute(ids, model, batch_size=args.batch_size, max_feature_nodes=cap)

    run(prompt[:4])  # untimed: one-time costs (lazy imports, first kernels) are not the graph's
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    gc.collect()
    reset_peak()  # VmHWM from here: every page the call touches, however briefly
    hwm_start = resident_bytes()
    with PeakRSS() as rss:
        start, cpu = time.perf_counter(), time.process_time()
        graph = run()
        if cuda:
            torch.cuda.synchronize()
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    peak = (torch.cuda.max_memory_allocated() - before) / 2**20 if cuda else rss.peak - rss.start
    hwm = (peak_bytes() - hwm_start) / 2**20
    adjacency = graph.adjacency_matrix if hasattr(graph, "adjacency_matrix") else graph.adjacency
    if args.save and adjacency.shape[0] <= args.compare_max_nodes:
        from safetensors.torch import save_file

        save_file({"adjacency": adjacency.float().cpu().contiguous()}, args.save)
    result = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "peak_mib": peak,
        "n_nodes": int(adjacency.shape[0]),
    }
    if args.worker == "interp" and not cuda:
        result["hwm_mib"] = hwm
    if args.worker == "interp" and args.max_memory_gb:
        chosen = plans[-1]  # the plan of the timed graph, made after its forward pass
        result.update(budget_gb=args.max_memory_gb, reads_per_pass=chosen.batch_size,
                      modelled_mib=chosen.peak() / 2**20)  # fmt: skip
    if args.explain_attention:  # interp's graph only: its strongest edges between positions explained
        from interp.circuits.features.attention import attention_edges, explain_edges

        edges = attention_edges(graph, args.explain_attention)
        start = time.perf_counter()
        explain_edges(model, tc, graph, edges, top_heads=3)
        if cuda:
            torch.cuda.synchronize()
        result.update(explain_seconds=time.perf_counter() - start, explained_edges=len(edges))
    print(json.dumps(result))


def _spy_on_plans() -> list:
    """Every memory plan ``attribute`` makes from now on, in order (the last is the timed graph's)."""
    from interp.circuits.features import direct_effects

    made, plan = [], direct_effects.plan

    def spy(*args, **kwargs):
        made.append(plan(*args, **kwargs))
        return made[-1]

    direct_effects.plan = spy
    return made


def _ct_transcoders(w: dict[str, torch.Tensor], device: str):
    """circuit-tracer's per-layer transcoder set on the same weights."""
    from circuit_tracer.transcoder.single_layer_transcoder import SingleLayerTranscoder, TranscoderSet

    layers = {}
    for i in range(len(w["W_enc"])):
        t = SingleLayerTranscoder(w["W_enc"].shape[2], w["W_enc"].shape[1], torch.nn.functional.relu, i,
                                  device=torch.device(device), dtype=torch.float32)  # fmt: skip
        with torch.no_grad():
            for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
                getattr(t, name).copy_(w[name][i])
        layers[i] = t
    return TranscoderSet(layers, feature_input_hook="mlp.hook_in", feature_output_hook="hook_mlp_out")


def circuit_tracer_model(folder: Path, transcoders, backend: str, device: str):
    """circuit-tracer's replacement model of the checkpoint in ``folder`` with ``backend``.

    nnsight reads the checkpoint itself. TransformerLens knows models by hub name only, so its model is built
    from a ``HookedTransformerConfig`` written from the checkpoint's ``config.json`` (the fields TransformerLens
    sets for a Llama), and the weights are converted with TransformerLens's Llama converter and loaded into
    circuit-tracer's wrapped modules (``mlp.old_mlp``, ``unembed.old_unembed``).
    """
    from circuit_tracer import ReplacementModel

    if backend == "nnsight":
        return ReplacementModel.from_pretrained_and_transcoders(
            str(folder), transcoders, backend="nnsight", device=torch.device(device), dtype=torch.float32
        )
    import transformers
    from transformer_lens import HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.llama import convert_llama_weights

    hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), torch_dtype=torch.float32)
    c = hf.config
    cfg = HookedTransformerConfig(
        n_layers=c.num_hidden_layers, d_model=c.hidden_size, n_heads=c.num_attention_heads,
        d_head=c.hidden_size // c.num_attention_heads, d_mlp=c.intermediate_size, d_vocab=c.vocab_size,
        n_ctx=c.max_position_embeddings, eps=c.rms_norm_eps, act_fn=c.hidden_act,
        n_key_value_heads=c.num_key_value_heads if c.num_key_value_heads != c.num_attention_heads else None,
        normalization_type="RMS", positional_embedding_type="rotary", rotary_adjacent_pairs=False,
        rotary_dim=c.hidden_size // c.num_attention_heads, rotary_base=c.rope_theta, final_rms=True,
        gated_mlp=True, original_architecture="LlamaForCausalLM", default_prepend_bos=False,
        device=device, dtype=torch.float32,
    )  # fmt: skip
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))  # it reads the special ids
    model = ReplacementModel.from_config(cfg, transcoders, backend="transformerlens", tokenizer=tokenizer)
    wrapped = {".mlp.": ".mlp.old_mlp.", "unembed.": "unembed.old_unembed."}
    state = {}
    for key, value in convert_llama_weights(hf, cfg).items():
        for old, new in wrapped.items():
            if old in key:
                key = key.replace(old, new)
        state[key] = value.detach().clone()
    del hf
    result = model.load_state_dict(state, strict=False)
    buffers = {name for name, _ in model.named_buffers(remove_duplicate=False)}  # shared between blocks
    missing = [k for k in result.missing_keys if not k.startswith("transcoders.") and k not in buffers]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"TransformerLens weights: missing {missing}, unexpected {result.unexpected_keys}")
    return model.eval()


def child(
    args: argparse.Namespace, which: str, folder: Path, length: int, cap: int, budget: float = 0.0
) -> dict:
    python = sys.executable if which == "interp" else args.ct_python
    saved = folder / (f"{which}.safetensors" if not budget else "interp-budget.safetensors")
    cmd = [python, __file__, "--worker", which, "--folder", str(folder), "--prompt-length", str(length),
           "--max-feature-nodes", str(cap), "--threads", str(args.threads), "--batch-size", str(args.batch_size),
           "--device", args.device, "--save", str(saved), "--max-memory-gb", str(budget),
           "--compare-max-nodes", str(args.compare_max_nodes),
           "--explain-attention", str(args.explain_attention)]  # fmt: skip
    env = {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(args.threads), "PATH": "/usr/bin:/bin"}
    env.update({k: v for k, v in os.environ.items() if k.startswith("MALLOC_")})
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {which} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def budget_row(args: argparse.Namespace, folder: Path, length: int, cap: int, budgets: list[float]) -> dict:
    """interp's graph without a budget, then with each of ``budgets``: peak over budget, reads per pass, and
    the largest difference from the unbudgeted graph (0.0: the same bits)."""
    from safetensors.torch import load_file

    free = child(args, "interp", folder, length, cap)
    row = {"prompt_length": length, "max_feature_nodes": cap or None, "interp": free, "budgets": []}
    free.setdefault("hwm_mib", free["peak_mib"])  # on CUDA: the device's peak allocation
    print(f"{args.size} pos={length} cap={cap or 'all'}: {free['n_nodes']} nodes, batch {args.batch_size}: "
          f"{free['seconds']:.2f}s, peak {free['hwm_mib']:.0f} MiB (VmHWM)", flush=True)  # fmt: skip
    for budget in budgets:
        try:
            ours = child(args, "interp", folder, length, cap, budget)
        except RuntimeError as e:  # refused: the least budget that works, in one line
            refusal = str(e).strip().splitlines()[-1]
            row["budgets"].append({"budget_gb": budget, "refused": refusal})
            print(f"  budget {budget:g} GiB: refused: {refusal}", flush=True)
            continue
        a, b = (
            load_file(str(folder / f))["adjacency"]
            for f in ("interp.safetensors", "interp-budget.safetensors")
        )
        ours["graph_difference"] = float((a - b).abs().max())
        ours.setdefault("hwm_mib", ours["peak_mib"])  # on CUDA: the device's peak allocation
        ours["peak_over_budget"] = ours["hwm_mib"] / (budget * 1024)
        ours["peak_over_modelled"] = ours["hwm_mib"] / ours["modelled_mib"]
        row["budgets"].append(ours)
        print(f"  budget {budget:g} GiB: {ours['reads_per_pass']} reads a pass, {ours['seconds']:.2f}s, peak "
              f"{ours['hwm_mib']:.0f} MiB = {ours['peak_over_budget']:.2f} x the budget, "
              f"{ours['peak_over_modelled']:.2f} x the model's {ours['modelled_mib']:.0f} MiB; "
              f"graph difference {ours['graph_difference']:.1e}", flush=True)  # fmt: skip
        if ours["hwm_mib"] > budget * 1024 and not args.keep_going:
            raise RuntimeError(f"budget {budget} GiB: the peak was {ours['hwm_mib']:.0f} MiB")
    return row


def cell(args: argparse.Namespace, backends: list[str], folder: Path, length: int, cap: int) -> dict:
    """One case, ``--rounds`` times: in each round interp's graph and then each backend's, each in a child
    process of its own, so that a round's ratios compare runs made within the same minute. Times and peaks are
    the medians over rounds; each ratio is the median of the rounds' ratios, with every round's kept."""
    rounds: list[dict] = []
    for _ in range(args.rounds):
        ours = child(args, "interp", folder, length, cap)
        got = {"interp": ours}
        for backend in backends:
            theirs = child(args, backend, folder, length, cap)
            diff = same_graph(folder, backend)
            if diff is not None and (diff > 1e-4 or theirs["n_nodes"] != ours["n_nodes"]):
                raise RuntimeError(
                    f"pos={length} cap={cap}: {backend}'s graph differs from interp's ({diff})"
                )
            got[backend] = {**theirs, "graph_difference": diff}
        rounds.append(got)
    row: dict = {"prompt_length": length, "max_feature_nodes": cap or None, "rounds": rounds}
    row["interp"] = {**_medians([r["interp"] for r in rounds]), "n_nodes": rounds[0]["interp"]["n_nodes"]}
    peaks = [r["interp"].get("hwm_mib", r["interp"]["peak_mib"]) for r in rounds]
    row["interp"]["peak_spread"] = (max(peaks) - min(peaks)) / min(peaks)  # over the runs, of the least
    for backend in backends:
        theirs = [r[backend] for r in rounds]
        time_ratios = [r["interp"]["seconds"] / r[backend]["seconds"] for r in rounds]
        cpu_ratios = [r["interp"]["cpu_seconds"] / r[backend]["cpu_seconds"] for r in rounds]
        memory_ratios = [r["interp"]["peak_mib"] / max(r[backend]["peak_mib"], 1e-9) for r in rounds]
        diffs = [t["graph_difference"] for t in theirs if t["graph_difference"] is not None]
        row[backend] = {**_medians(theirs), "n_nodes": theirs[0]["n_nodes"],
                        "graph_difference": max(diffs) if diffs else None,
                        "time_ratio": statistics.median(time_ratios), "time_ratios": time_ratios,
                        "cpu_time_ratio": statistics.median(cpu_ratios), "cpu_time_ratios": cpu_ratios,
                        "memory_ratio": statistics.median(memory_ratios),
                        "memory_ratios": memory_ratios}  # fmt: skip
    return row


def _medians(runs: list[dict]) -> dict:
    keys = ("seconds", "cpu_seconds", "peak_mib", "hwm_mib", "explain_seconds", "explained_edges")
    return {k: statistics.median(r[k] for r in runs) for k in keys if k in runs[0]}


def _spread(values: list[float]) -> str:
    return f" [{min(values):.2f}-{max(values):.2f}]" if len(values) > 1 else ""


def same_graph(folder: Path, backend: str) -> float | None:
    """max |A_backend - A_interp| over max |A_interp|, or None where the graphs were too large to keep."""
    from safetensors.torch import load_file

    files = [folder / f"{which}.safetensors" for which in ("interp", backend)]
    if not all(f.exists() for f in files):
        return None
    ours, theirs = (load_file(str(f))["adjacency"] for f in files)
    files[1].unlink()  # interp's stays for the next backend
    if ours.shape != theirs.shape:
        raise RuntimeError(f"{backend}: adjacency {tuple(theirs.shape)}, interp's {tuple(ours.shape)}")
    return float((ours - theirs).abs().max() / ours.abs().max())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ct-python", help="the Python of an environment with circuit-tracer 0.5.0")
    p.add_argument("--size", choices=tuple(SIZES), default="tiny")
    p.add_argument("--d-transcoder", type=int, default=4096)
    p.add_argument("--prompt-lengths", default="8,32")
    p.add_argument("--max-feature-nodes", default="0", help="comma-separated caps; 0: every active feature")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=1, help="rounds per case (medians and every round kept)")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--backends", default=",".join(BACKENDS), help="circuit-tracer's backends, comma-separated"
    )
    p.add_argument("--compare-max-nodes", type=int, default=12000, help="compare adjacencies up to this size")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument(
        "--explain-attention", type=int, default=0, metavar="N", help="interp only: also explain N edges"
    )
    p.add_argument(
        "--max-memory-gb",
        default="",
        help="comma-separated budgets in GiB: interp alone, one graph with each budget and one without",
    )
    p.add_argument("--keep-going", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker", choices=("interp", *BACKENDS), help=argparse.SUPPRESS)
    p.add_argument("--save", help=argparse.SUPPRESS)
    p.add_argument("--folder", help=argparse.SUPPRESS)
    p.add_argument("--prompt-length", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.max_feature_nodes = int(args.max_feature_nodes)
        args.max_memory_gb = float(args.max_memory_gb or 0)
        return worker(args)
    budgets = [float(x) for x in args.max_memory_gb.split(",") if x]
    if budgets or args.explain_attention:
        args.backends = ""  # interp alone: the explanation against its own graph
    if not args.ct_python and args.backends and not (args.explain_attention or budgets):
        p.error("--ct-python is needed: the interpreter of an environment with circuit-tracer 0.5.0")
    env = provenance.environment(
        ["transformers"],
        others={args.ct_python: ["circuit-tracer", "nnsight", "transformer-lens", "transformers", "torch"]}
        if args.ct_python
        else {},
    )
    backends = [b for b in args.backends.split(",") if b]
    if unknown := set(backends) - set(BACKENDS):
        p.error(f"--backends: unknown {sorted(unknown)}; circuit-tracer's backends are {', '.join(BACKENDS)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build(folder, args.size, args.d_transcoder)
        for length in (int(x) for x in args.prompt_lengths.split(",")):
            for cap in (int(x) for x in args.max_feature_nodes.split(",")):
                if budgets:
                    rows.append(budget_row(args, folder, length, cap, budgets))
                    continue
                row = cell(args, backends, folder, length, cap)
                ours = row["interp"]
                line = (
                    f"{args.size} pos={length} cap={cap or 'all'}: {ours['n_nodes']} nodes; interp "
                    f"{ours['seconds']:.2f}s {ours['peak_mib']:.0f} MiB"
                )
                if args.rounds > 1:
                    peaks = [r["interp"].get("hwm_mib", r["interp"]["peak_mib"]) for r in row["rounds"]]
                    line += (
                        f" (peak over {args.rounds} runs {min(peaks):.1f}-{max(peaks):.1f} MiB: spread "
                        f"{100 * ours['peak_spread']:.1f}%)"
                    )
                for backend in backends:
                    theirs, diff = row[backend], row[backend]["graph_difference"]
                    line += (
                        f"; {backend} {theirs['seconds']:.2f}s {theirs['peak_mib']:.0f} MiB "
                        f"(time {theirs['time_ratio']:.2f}x{_spread(theirs['time_ratios'])}, CPU time "
                        f"{theirs['cpu_time_ratio']:.2f}x{_spread(theirs['cpu_time_ratios'])}, memory "
                        f"{theirs['memory_ratio']:.2f}x{_spread(theirs['memory_ratios'])}, "
                        f"graph {'not compared' if diff is None else f'difference {diff:.1e}'})"
                    )
                if args.explain_attention:
                    row["explain_ratio"] = ours["explain_seconds"] / ours["seconds"]
                    line += (
                        f"; {ours['explained_edges']} edges explained in {ours['explain_seconds']:.2f}s: "
                        f"{row['explain_ratio']:.2f}x the graph's time"
                    )
                rows.append(row)
                print(line, flush=True)
    if args.out:
        figures = {"size": args.size, "d_transcoder": args.d_transcoder, "threads": args.threads,
                   "device": args.device, "circuit_tracer_backends": backends, "batch_size": args.batch_size,
                   "rounds": args.rounds,
                   "max_memory_gb": budgets, "rows": rows}  # fmt: skip
        provenance.write_run(args.out, figures, env)


if __name__ == "__main__":
    main()
