"""``interp sae train``: stream a corpus through a model into an activation store and train an SAE on it.

Every setting is checked before the model loads: the output folder (new, empty or this same run's), the
device and dtype, the model (found), the corpus (text, JSONL with a ``text`` field, or parquet with a
``text`` column, holding non-empty text), and every training setting, by the library's own
:class:`~interp.sae.training.TrainSettings` (so ``--lr -1`` is refused in the words ``interp.sae.train``
would use, with the flag's name). Once the model is loaded the hook must exist and be one row per token. The run
itself is the library's (:class:`~interp.sae.training.run_folder.RunFolder`): a run being resumed must have
the hook's width; the texts are cut into windows of ``--context`` tokens, cached into ``OUT/activations``
(resumable by shard) and trained on with checkpoints in ``OUT/checkpoint`` (resumable by step); the SAE is
written to ``OUT/sae`` in the SAELens format. Run the same command again to resume. A run that stopped
before its first checkpoint holds no training, so its retry may change the training settings (only what the
cached activations depend on must stay).

With ``--kind transcoder|skip-transcoder|clt`` the store caches every trained layer's input and output hook
(``--input-site``, ``--output-site``) from the same forward, transcoders are trained on them, and they are
written to ``OUT/transcoders`` in circuit-tracer's format.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import warnings
from pathlib import Path
from typing import Any

from interp.arguments import add_command, add_device_arguments, non_negative_int, positive_int

SETTING_FLAGS = {
    "d_sae": "--d-sae",
    "architecture": "--architecture",
    "k": "--k",
    "lr": "--lr",
    "tokens": "--tokens",
    "batch_size": "--train-batch-size",
    "checkpoint_every": "--checkpoint-every",
    "buffer_rows": "--buffer-rows",
    "min_position": "--skip-first",
}
"""The flag that sets each :class:`~interp.sae.training.TrainSettings` field the command sets (a refusal names the
field: :class:`~interp.sae.training.SettingError`)."""


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


def preflight(args: argparse.Namespace) -> tuple[list[str], Any]:
    """Everything that can be checked before the model loads.

    Returns:
        The corpus's texts and the run's folder (:class:`~interp.sae.training.run_folder.RunFolder`: the
        settings as ``run.json`` records them, and the earlier run in ``--out`` to resume, if any).
    """
    from interp.preflight import check_command, check_owned, check_placement
    from interp.sae.training import SettingError, TrainSettings
    from interp.sae.training.run_folder import RECORD, RunFolder
    from interp.store import read_corpus

    check_placement(args)  # the placement flags, before the model is looked for
    check_command(out=args.out, device=args.device, dtype=args.dtype, model=args.model, data=args.data)
    out = Path(args.out).expanduser()
    check_owned(out, None, (out / RECORD).is_file(), flag="--out", command="interp sae train", record=RECORD)
    try:
        TrainSettings(**training_settings(args))
    except SettingError as err:
        raise ValueError(f"{SETTING_FLAGS[err.name]} {err.value!r}{err.reason}") from None
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
    return texts, RunFolder.open(Path(args.out).expanduser(), settings)


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


def run(args: argparse.Namespace) -> int:
    """Run ``interp sae train`` (see the module docstring)."""
    texts, folder = preflight(args)
    from interp import distributed
    from interp.load import load
    from interp.preflight import check_placement
    from interp.sae.training import TrainingWarning

    placement = check_placement(args)
    with distributed.session():
        device = args.device
        if distributed.is_distributed() and device in (None, "cuda"):
            device = distributed.device()
        model = load(args.model, device=device, dtype=args.dtype, **placement)
        plan = _sae_plan(model, args) if args.kind == "sae" else _transcoder_plan(model, args)
        with warnings.catch_warnings():  # said below, in the command's words
            warnings.simplefilter("ignore", TrainingWarning)
            trained = folder.train(
                model,
                texts,
                plan,
                context=args.context,
                batch_size=args.batch_size,
                shard_rows=args.shard_rows,
                progress=not args.quiet,
            )
        if distributed.rank() == 0:
            print(trained.summary)
            if trained.warning is not None:
                print(f"warning: {trained.warning}", file=sys.stderr)
    return 0


def _sae_plan(model: Any, args: argparse.Namespace) -> Any:
    """The SAE's plan, its one hook (``--hook``) checked against the loaded model."""
    from interp.dictionary import hook_width
    from interp.sae.training.run_folder import Plan

    hooks = model.resolve(args.hook)
    if len(hooks) != 1:
        raise ValueError(f"--hook {args.hook!r} selects {len(hooks)} hooks; name one hook")
    hook = hooks[0]
    if hook.endswith(("hook_pattern", "hook_attn_scores")):
        raise ValueError(f"--hook {hook} is [batch, head, query, key]; an SAE reads one row per token")
    return Plan("sae", hook_width(model, hook), training_settings(args), hook=hook)


def _transcoder_plan(model: Any, args: argparse.Namespace) -> Any:
    """The transcoders' plan, their layers (``--layers``) and hooks checked against the loaded model."""
    from hooks.names import UnknownHookError, unknown_hook_message
    from interp.sae.training.run_folder import Plan

    layers = parse_layers(args.layers, model.cfg.n_layers)
    if args.kind == "clt" and layers != list(range(model.cfg.n_layers)):
        raise ValueError(f"--kind clt spans every layer; drop --layers (got {args.layers!r})")
    sites = (args.input_site, args.output_site)
    plan = Plan(args.kind, model.cfg.d_model, training_settings(args), layers=layers, sites=sites)
    for hook in plan.hooks:
        if hook not in model.hook_dict:
            raise UnknownHookError(unknown_hook_message(hook, model.hook_dict))
    return plan
