"""``interp sae train``: stream a corpus through a model into an activation store and train an SAE on it.

With ``--kind transcoder|skip-transcoder|clt`` the store caches every trained layer's input and output hook
(``--input-site``, ``--output-site``) from the same forward, transcoders are trained on them, and they are
written to ``OUT/transcoders`` in circuit-tracer's format.

Every input is checked before the model runs a forward pass: the corpus (text, JSONL with a ``text`` field, or
parquet with a ``text`` column) must hold non-empty text, ``k`` must not exceed ``d_sae``, the output folder must
be new, empty or this same run's, the hook must exist and be one row per token, and a run being resumed must
have the hook's width. Then the texts are cut into windows of ``--context`` tokens, cached into
``OUT/activations`` (resumable by shard) and trained on with checkpoints in ``OUT/checkpoint`` (resumable by
step); the SAE is written to ``OUT/sae`` in the SAELens format. Run the same command again to resume.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from interp import distributed

RUN = "run.json"


def read_corpus(path: str | Path) -> list[str]:
    """The texts of a corpus file: one per non-blank line, JSONL ``text`` fields, or a parquet ``text`` column."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--data {path} does not exist")
    if path.suffix == ".parquet":
        try:
            import pandas as pd

            frame = pd.read_parquet(path)
        except ImportError as err:
            raise ValueError(f"reading {path} needs pyarrow (pip install pyarrow): {err}") from None
        if "text" not in frame.columns:
            raise ValueError(f"{path} has columns {list(frame.columns)}; a corpus needs a 'text' column")
        texts = frame["text"].tolist()
    else:
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"--data {path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
        if "\x00" in raw:
            raise ValueError(f"--data {path} holds NUL bytes: it is a binary file, not text")
        from interp.store import read_items

        items = read_items(path)
        texts = [item if isinstance(item, str) else item.get("text") for item in items]
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"{path}: item {bad[0]} has no text (each needs a 'text' string)")
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError(f"--data {path} holds no text; give a file with at least one non-blank line")
    return texts


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
    """The earlier run in ``out`` (to resume), ``None`` for a new folder; raises for anything else."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder")
    if not out.exists() or not any(out.iterdir()):
        return None
    run = out / RUN
    if not run.is_file():
        raise ValueError(f"--out {out} is not empty and holds no {RUN}; give a new or empty folder")
    earlier = json.loads(run.read_text(encoding="utf-8"))
    diffs = [
        f"{k} was {earlier['settings'].get(k)!r}, now {v!r}"
        for k, v in settings.items()
        if earlier["settings"].get(k) != v
    ]
    if diffs:
        raise ValueError(
            f"--out {out} holds another run ({'; '.join(diffs)}); use another folder to start over"
        )
    return earlier


def windows(
    model: Any, texts: list[str], context: int, batch_size: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The texts cut into windows of at most ``context`` tokens, in batches ``(ids, mask)`` padded right."""
    pieces: list[torch.Tensor] = []
    for start in range(0, len(texts), 64):
        ids, mask = model.to_tokens(texts[start : start + 64])
        for row, m in zip(ids.cpu(), mask.cpu(), strict=True):
            real = row[m.bool()]
            pieces.extend(real[s : s + context] for s in range(0, len(real), context))
    batches = []
    pad = getattr(model.tokenizer, "pad_id", None) or 0
    for start in range(0, len(pieces), batch_size):
        group = pieces[start : start + batch_size]
        width = max(len(p) for p in group)
        ids = torch.full((len(group), width), pad, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for i, p in enumerate(group):
            ids[i, : len(p)], mask[i, : len(p)] = p, 1
        batches.append((ids, mask))
    return batches


def sae_main(args: argparse.Namespace) -> int:
    """Run ``interp sae train`` (see the module docstring)."""
    from interp.load import load
    from interp.sae.formats import save
    from interp.sae.splice import hook_width
    from interp.sae.training import TrainSettings, train
    from interp.store import cache_activations

    TrainSettings(
        d_sae=args.d_sae, architecture=args.architecture, k=args.k, batch_size=args.train_batch_size
    )
    kind = getattr(args, "kind", "sae")
    if kind == "sae" and args.hook is None:
        raise ValueError("--hook is required for an SAE (--kind sae); e.g. --hook blocks.6.hook_resid_post")
    if kind != "sae" and args.hook is not None:
        raise ValueError(f"--hook is for SAEs; --kind {kind} reads --input-site and writes --output-site")
    if args.context < 1:
        raise ValueError(f"--context {args.context}; give at least 1 token per window")
    texts = read_corpus(args.data)
    data_sha = hashlib.sha256(Path(args.data).read_bytes()).hexdigest()
    out = Path(args.out)
    settings = _settings(args, data_sha)
    earlier = check_out(out, settings)
    with distributed.session():
        device = args.device
        if distributed.is_distributed() and device in (None, "cuda"):
            device = distributed.device()
        model = load(args.model, device=device, dtype=args.dtype)
        if kind != "sae":
            return _transcoders(model, args, texts, settings, out)
        hooks = model.resolve(args.hook)
        if len(hooks) != 1:
            raise ValueError(f"--hook {args.hook!r} selects {len(hooks)} hooks; name one hook")
        hook = hooks[0]
        if hook.endswith(("hook_pattern", "hook_attn_scores")):
            raise ValueError(f"--hook {hook} is [batch, head, query, key]; an SAE reads one row per token")
        width = hook_width(model, hook)
        if earlier is not None and width is not None and earlier.get("d_in") not in (None, width):
            raise ValueError(
                f"--out {out} was trained with d_in={earlier['d_in']}, but {hook} has width {width}"
            )
        if args.context > model.cfg.n_ctx:
            raise ValueError(f"--context {args.context} is longer than the model's n_ctx={model.cfg.n_ctx}")
        if distributed.rank() == 0:
            out.mkdir(parents=True, exist_ok=True)
            record = {"settings": settings, "d_in": width, "complete": False}
            (out / RUN).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        distributed.barrier()
        batches = windows(model, texts, args.context, args.batch_size)
        store = cache_activations(
            model,
            batches,
            [hook],
            out / "activations",
            shard_rows=args.shard_rows,
            progress=not args.quiet,
        )
        sae = train(store, hook_name=hook, d_sae=args.d_sae, **_training_options(args, out))
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


def _training_options(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The trainer's keyword arguments every kind of run takes from the command line."""
    return dict(
        architecture=args.architecture,
        k=args.k,
        lr=args.lr,
        tokens=args.tokens,
        batch_size=args.train_batch_size,
        seed=args.seed,
        checkpoint_dir=out / "checkpoint",
        checkpoint_every=args.checkpoint_every,
        buffer_rows=args.buffer_rows,
        min_position=args.skip_first,
        progress=not args.quiet,
    )


def _transcoders(
    model: Any, args: argparse.Namespace, texts: list[str], settings: dict[str, Any], out: Path
) -> int:
    """The transcoder branch of :func:`sae_main`, once the model is loaded (inside the distributed session)."""
    from interp.sae.formats.transcoders import save_transcoders
    from interp.sae.training import train_transcoders
    from interp.store import cache_activations

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
    sites = dict(input_site=args.input_site, output_site=args.output_site)
    options = _training_options(args, out)
    tc = train_transcoders(store, kind=args.kind, layers=layers, d_transcoder=args.d_sae, **sites, **options)
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
