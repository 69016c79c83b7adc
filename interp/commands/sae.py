"""``interp sae train``: stream a corpus through a model into an activation store and train an SAE on it.

Every setting is checked before the model loads: the output folder (new, empty or this same run's), the
device and dtype, the model (found), the corpus (text, JSONL with a ``text`` field, or parquet with a
``text`` column, holding non-empty text), and every training setting, by the library's own
:class:`~interp.sae.training.TrainSettings` (so ``--lr -1`` is refused in the words ``interp.sae.train``
would use, with the flag's name). Once the model is loaded the hook must exist and be one row per token, and a
run being resumed must have the hook's width. Then the texts are cut into windows of ``--context`` tokens,
cached into ``OUT/activations`` (resumable by shard) and trained on with checkpoints in ``OUT/checkpoint``
(resumable by step); the SAE is written to ``OUT/sae`` in the SAELens format. Run the same command again to
resume. A run that stopped before its first checkpoint holds no training, so its retry may change the
training settings (only what the cached activations depend on must stay).

With ``--kind transcoder|skip-transcoder|clt`` the store caches every trained layer's input and output hook
(``--input-site``, ``--output-site``) from the same forward, transcoders are trained on them, and they are
written to ``OUT/transcoders`` in circuit-tracer's format.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from interp.arguments import add_command, add_device_arguments, non_negative_int, positive_int

RUN = "run.json"
CACHE_KEYS = ("data_sha256", "model", "hook", "context")
"""The settings the cached activations depend on; the others only matter once training has taken a step."""
SETTING_FLAGS = {
    "d_sae": "--d-sae",
    "k": "--k",
    "lr": "--lr",
    "tokens": "--tokens",
    "batch_size": "--train-batch-size",
    "checkpoint_every": "--checkpoint-every",
    "buffer_rows": "--buffer-rows",
    "min_position": "--skip-first",
    "architecture": "--architecture",
}


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp sae`` (and ``interp sae train``) to the subcommands."""
    p = add_command(
        sub,
        "sae",
        summary="sparse autoencoders: train one on a model's activations",
        description="Sparse autoencoders. 'interp sae train --help' describes training one.",
        example="interp sae train smollm2-135m --data corpus.txt --hook blocks.6.hook_resid_post --d-sae 4096 "
        "--k 32 --out sae-run",
    )
    sae_sub = p.add_subparsers(dest="sae_command", required=True, metavar="{train}")
    t = add_command(
        sae_sub,
        "train",
        summary="cache a corpus's activations at a hook and train an SAE on them",
        description=(
            "Cut a corpus into windows, cache the activations of one hook into OUT/activations, train a\n"
            "sparse autoencoder on them with checkpoints in OUT/checkpoint, and write it to OUT/sae in the\n"
            "SAELens format (interp.sae.load reads it). Run the same command again to resume."
        ),
        example="interp sae train smollm2-135m --data corpus.txt --hook blocks.6.hook_resid_post --d-sae 4096 "
        "--k 32 --out sae-run",
    )
    add_train_arguments(t)
    t.set_defaults(fn=run)


def add_train_arguments(t: argparse.ArgumentParser) -> None:
    """The arguments of ``interp sae train`` (one function, so that other kinds of dictionary can extend it)."""
    t.add_argument("model", help="packaged name, Hugging Face folder or .gguf file")
    t.add_argument("--data", required=True, help="text (one item a line), JSONL with 'text', or parquet")
    t.add_argument(
        "--kind",
        default="sae",
        choices=("sae", "transcoder", "skip-transcoder", "clt"),
        help="an SAE at --hook, or transcoders (per layer, with a skip, cross-layer) from MLP input to output",
    )
    t.add_argument(
        "--hook", default=None, help="the hook an SAE reads, e.g. blocks.6.hook_resid_post (default: none)"
    )
    t.add_argument(
        "--layers", default=None, help="transcoders: layers to train, comma separated (default: all)"
    )
    t.add_argument(
        "--input-site", default="ln2.hook_normalized", help="transcoders: the hook read in a block"
    )
    t.add_argument("--output-site", default="hook_mlp_out", help="transcoders: the hook written in a block")
    t.add_argument("--d-sae", type=int, required=True, help="number of latents (features per layer)")
    t.add_argument(
        "--k",
        type=int,
        default=None,
        help="active latents per token (needed by topk, batchtopk; default: none)",
    )
    t.add_argument("--out", required=True, help="output folder (activations, checkpoint, sae)")
    t.add_argument(
        "--architecture",
        default="topk",
        choices=("topk", "batchtopk", "standard", "jumprelu"),
        help="the SAE",
    )
    t.add_argument(
        "--tokens", type=int, default=None, help="training rows (default: one pass over the cache)"
    )
    t.add_argument("--train-batch-size", type=int, default=4096, help="rows per training step")
    t.add_argument("--batch-size", type=positive_int, default=16, help="windows per model forward pass")
    t.add_argument("--context", type=positive_int, default=128, help="tokens per window")
    t.add_argument(
        "--lr", type=float, default=None, help="Adam's learning rate (default: 2e-4 / sqrt(d_sae / 2**14))"
    )
    t.add_argument("--seed", type=int, default=0, help="decides the initial dictionary and the row order")
    t.add_argument("--checkpoint-every", type=int, default=200, help="steps between checkpoints")
    t.add_argument("--shard-rows", type=positive_int, default=8192, help="rows per activation shard")
    t.add_argument("--buffer-rows", type=int, default=262144, help="rows shuffled in memory at once")
    t.add_argument(
        "--skip-first", type=non_negative_int, default=1, help="tokens at the start of each window left out"
    )
    add_device_arguments(t)


def preflight(args: argparse.Namespace) -> tuple[list[str], dict[str, Any], dict[str, Any] | None]:
    """Everything that can be checked before the model loads.

    Returns:
        The corpus's texts, the run's settings (as recorded in ``run.json``) and the earlier run in ``--out``
        to resume, or ``None``.
    """
    from interp.preflight import check_command, check_placement
    from interp.sae.training import TrainSettings
    from interp.store import read_corpus

    check_placement(args)  # the placement flags, before the model is looked for
    check_command(out=args.out, device=args.device, dtype=args.dtype, model=args.model, data=args.data)
    try:
        TrainSettings(**training_settings(args))
    except ValueError as err:
        raise ValueError(_flag_message(str(err))) from None
    if args.skip_first >= args.context:
        raise ValueError(
            f"--skip-first {args.skip_first} leaves no token of a --context {args.context} window to train on; "
            f"give fewer than {args.context}"
        )
    if args.kind == "sae" and args.hook is None:
        raise ValueError("--hook is required for an SAE (--kind sae); e.g. --hook blocks.6.hook_resid_post")
    if args.kind != "sae" and args.hook is not None:
        raise ValueError(
            f"--hook is for SAEs; --kind {args.kind} reads --input-site and writes --output-site"
        )
    texts = read_corpus(args.data)
    settings = _settings(args, hashlib.sha256(Path(args.data).read_bytes()).hexdigest())
    return texts, settings, check_out(Path(args.out).expanduser(), settings)


def training_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~interp.sae.training.TrainSettings` fields the flags set, by their field names."""
    return {
        "d_sae": args.d_sae,
        "architecture": args.architecture,
        "k": args.k,
        "lr": args.lr,
        "tokens": args.tokens,
        "batch_size": args.train_batch_size,
        "seed": args.seed,
        "checkpoint_every": args.checkpoint_every,
        "buffer_rows": args.buffer_rows,
        "min_position": args.skip_first,
    }


def _flag_message(message: str) -> str:
    """``lr=-1.0; ...`` as ``--lr -1.0; ...``: the library's words with the command's flag."""
    match = re.match(r"(\w+)=(\S+?)([;:,]|\s)", message)
    if match is None or match.group(1) not in SETTING_FLAGS:
        return message
    return f"{SETTING_FLAGS[match.group(1)]} {match.group(2)}{message[match.end(2) :]}"


def _settings(args: argparse.Namespace, data_sha: str) -> dict[str, Any]:
    keys = (
        "model",
        "hook",
        "d_sae",
        "k",
        "architecture",
        "tokens",
        "train_batch_size",
        "context",
        "lr",
        "seed",
    )
    settings = {"data_sha256": data_sha, **{k: getattr(args, k) for k in keys}}
    kind = getattr(args, "kind", "sae")
    if kind != "sae":  # an SAE run's record stays as it was, so earlier runs still resume
        settings.update(
            kind=kind, layers=args.layers, input_site=args.input_site, output_site=args.output_site
        )
    return settings


def parse_layers(text: str | None, n_layers: int) -> list[int]:
    """``--layers`` as a list (``None``: every layer), each checked against the model's ``n_layers``."""
    if text is None:
        return list(range(n_layers))
    try:
        layers = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--layers {text!r}; give layer numbers separated by commas, e.g. 0,1,2") from None
    bad = [layer for layer in layers if not 0 <= layer < n_layers]
    if bad or not layers:
        raise ValueError(f"--layers {text!r}: the model has layers 0..{n_layers - 1}")
    return layers


def transcoder_hooks_for(model: Any, args: argparse.Namespace) -> tuple[list[int], list[str]]:
    """The layers and the hooks a transcoder run caches, checked against the model before any forward."""
    from hooks.names import UnknownHookError, unknown_hook_message
    from interp.sae.training.transcoders import transcoder_hooks

    layers = parse_layers(args.layers, model.cfg.n_layers)
    if args.kind == "clt" and layers != list(range(model.cfg.n_layers)):
        raise ValueError(f"--kind clt spans every layer; drop --layers (got {args.layers!r})")
    hooks = transcoder_hooks(layers, args.input_site, args.output_site)
    for hook in hooks:
        if hook not in model.hook_dict:
            raise UnknownHookError(unknown_hook_message(hook, model.hook_dict))
    return layers, hooks


def check_out(out: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The earlier run in ``out`` (to resume), ``None`` for a new folder; raises for anything else.

    A run that has not saved a training checkpoint is compared only on what its cached activations depend
    on (:data:`CACHE_KEYS`), or on nothing when it cached nothing either: it holds nothing its retry with
    other settings would lose.
    """
    from interp.sae.training.state import CHECKPOINT, load_checkpoint

    if not out.exists() or not any(out.iterdir()):
        return None
    run = out / RUN
    if not run.is_file():
        raise ValueError(f"--out {out} is not empty and holds no {RUN}; give a new or empty folder")
    try:
        earlier = json.loads(run.read_text(encoding="utf-8"))
        recorded = earlier["settings"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            f"--out {out}: {run} is not a run record of interp sae train; give another folder"
        ) from None
    trained = (out / "checkpoint" / CHECKPOINT).is_file() or earlier.get("complete", False)
    cached = (out / "activations").is_dir() and any((out / "activations").iterdir())
    if not trained and not cached:
        return None
    keys = list(settings) if trained else list(CACHE_KEYS)
    diffs = [
        f"{k} was {recorded.get(k)!r}, now {settings[k]!r}" for k in keys if recorded.get(k) != settings[k]
    ]
    if diffs:
        raise ValueError(
            f"--out {out} holds another run ({'; '.join(diffs)}); use another folder to start over"
        )
    if trained:
        load_checkpoint(out / "checkpoint" / CHECKPOINT)  # a truncated checkpoint is refused now, by name
    return earlier


def run(args: argparse.Namespace) -> int:
    """Run ``interp sae train`` (see the module docstring)."""
    texts, settings, earlier = preflight(args)
    from interp import distributed
    from interp.load import load
    from interp.preflight import check_placement

    placement = check_placement(args)
    from interp.sae.formats import save
    from interp.sae.splice import hook_width
    from interp.sae.training import train
    from interp.store import cache_activations, windows

    out = Path(args.out).expanduser()
    with distributed.session():
        device = args.device
        if distributed.is_distributed() and device in (None, "cuda"):
            device = distributed.device()
        model = load(args.model, device=device, dtype=args.dtype, **placement)
        if args.kind != "sae":
            return _transcoders(model, args, texts, settings, out)
        hook = _check_hook(model, args, earlier, out)
        if distributed.rank() == 0:
            out.mkdir(parents=True, exist_ok=True)
            record = {"settings": settings, "d_in": hook_width(model, hook), "complete": False}
            (out / RUN).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        distributed.barrier()
        batches = windows(model, texts, args.context, args.batch_size)
        store = cache_activations(
            model, batches, [hook], out / "activations", shard_rows=args.shard_rows, progress=not args.quiet
        )
        sae = train(
            store,
            hook_name=hook,
            checkpoint_dir=out / "checkpoint",
            progress=not args.quiet,
            **training_settings(args),
        )
        if distributed.rank() == 0:
            save(sae, out / "sae")
            last = sae.cfg.metadata["training"]["history"][-1]
            record = {"settings": settings, "d_in": sae.d_in, "complete": True, "final": last}
            (out / RUN).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
            print(
                f"{out / 'sae'}: {args.architecture} SAE, d_in={sae.d_in}, d_sae={sae.d_sae}, trained on "
                f"{len(store):,} cached rows ({sae.cfg.metadata['training']['tokens']:,} rows seen); "
                f"final fraction of variance unexplained {last['fvu']:.3f}, L0 {last['l0']:.1f}"
            )
    return 0


def _check_hook(model: Any, args: argparse.Namespace, earlier: dict[str, Any] | None, out: Path) -> str:
    """The one hook ``--hook`` names, checked against the loaded model and the run being resumed."""
    from interp.sae.splice import hook_width

    hooks = model.resolve(args.hook)
    if len(hooks) != 1:
        raise ValueError(f"--hook {args.hook!r} selects {len(hooks)} hooks; name one hook")
    hook = hooks[0]
    if hook.endswith(("hook_pattern", "hook_attn_scores")):
        raise ValueError(f"--hook {hook} is [batch, head, query, key]; an SAE reads one row per token")
    width = hook_width(model, hook)
    if earlier is not None and width is not None and earlier.get("d_in") not in (None, width):
        raise ValueError(f"--out {out} was trained with d_in={earlier['d_in']}, but {hook} has width {width}")
    if args.context > model.cfg.n_ctx:
        raise ValueError(f"--context {args.context} is longer than the model's n_ctx={model.cfg.n_ctx}")
    return hook


def _transcoders(
    model: Any, args: argparse.Namespace, texts: list[str], settings: dict[str, Any], out: Path
) -> int:
    """The transcoder branch of :func:`run`, once the model is loaded (inside the distributed session)."""
    from interp import distributed
    from interp.sae.formats.transcoders import save_transcoders
    from interp.sae.training import train_transcoders
    from interp.store import cache_activations, windows

    layers, hooks = transcoder_hooks_for(model, args)
    if args.context > model.cfg.n_ctx:
        raise ValueError(f"--context {args.context} is longer than the model's n_ctx={model.cfg.n_ctx}")
    if distributed.rank() == 0:
        out.mkdir(parents=True, exist_ok=True)
        record = {"settings": settings, "d_in": model.cfg.d_model, "complete": False}
        (out / RUN).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    distributed.barrier()
    batches = windows(model, texts, args.context, args.batch_size)
    store = cache_activations(
        model, batches, hooks, out / "activations", shard_rows=args.shard_rows, progress=not args.quiet
    )
    options = training_settings(args)
    options["d_transcoder"] = options.pop("d_sae")
    tc = train_transcoders(
        store,
        kind=args.kind,
        layers=layers,
        input_site=args.input_site,
        output_site=args.output_site,
        checkpoint_dir=out / "checkpoint",
        progress=not args.quiet,
        **options,
    )
    if distributed.rank() == 0:
        save_transcoders(tc, out / "transcoders")
        last = tc.metadata["training"]["history"][-1]
        record = {"settings": settings, "d_in": tc.d_model, "complete": True, "final": last}
        (out / RUN).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(
            f"{out / 'transcoders'}: {args.kind} ({args.architecture}) at layers {layers}, d_transcoder="
            f"{tc.d_transcoder}, trained on {len(store):,} cached rows; final fraction of variance unexplained "
            f"{last['fvu']:.3f}, L0 {last['l0']:.1f} per layer"
        )
    return 0
