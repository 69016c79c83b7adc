"""``interp cache MODEL``: stream a data set through a model into an activation store.

Everything that can be checked without the model is checked before it loads: the output folder (a file, a
place nothing can be created, a folder of other files, a store with other settings), the data file (every
line), the flags, the device and dtype, the model (found), and the hook names as far as their spelling goes.
The store itself is :func:`interp.store.cache_activations`.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from interp.arguments import add_command, add_device_arguments, positive_int

_GLOB_CHARS = re.compile(r"[*?\[]")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp cache`` to the subcommands."""
    p = add_command(
        sub,
        "cache",
        summary="stream a data set through a model into an activation store",
        description=(
            "Run a model over every item of a data file and keep the activations of the hooks named, one\n"
            "row per token, in safetensors shards with an index (read them with interp.store.ActivationStore).\n"
            "A run that stops can be resumed with the same command: it continues after its last shard."
        ),
        example=("interp cache smollm2-135m --data texts.txt --hooks 'blocks.*.hook_resid_post' --out acts"),
    )
    p.add_argument("model", help="packaged name, HF folder or .gguf file")
    p.add_argument("--data", required=True, help="a text file (one item a line) or JSONL with 'text'")
    p.add_argument("--hooks", required=True, help="hook names or a glob, comma separated")
    p.add_argument("--out", required=True, help="the store folder (new, empty, or this store to resume)")
    p.add_argument("--overwrite", action="store_true", help="replace the activation store already in --out")
    p.add_argument("--batch-size", type=positive_int, default=16, help="items per forward pass")
    p.add_argument(
        "--positions", default="all", help="'all', 'last', or comma-separated indices such as 0,-1"
    )
    p.add_argument("--shard-rows", type=positive_int, default=4096, help="rows per shard file")
    add_device_arguments(p)
    p.set_defaults(fn=run)


def parse_positions(text: str) -> str | list[int]:
    """``"all"``, ``"last"`` or comma-separated ints (``"0,-1"``)."""
    if text in ("all", "last"):
        return text
    try:
        return [int(p) for p in text.split(",")]
    except ValueError:
        raise ValueError(
            f"--positions {text!r}; use 'all', 'last' or comma-separated ints such as 0,-1"
        ) from None


def parse_hooks(text: str) -> list[str]:
    """Comma-separated hook names or globs, checked as far as that is possible without the model.

    Raises:
        ValueError: no names, an empty entry, a plain name that is not a hook (hooks end in ``hook_...``), or
            an attention pattern or score (not one row per token).
    """
    from interp.store.cache import check_per_token

    names = [h.strip() for h in text.split(",")]
    if not any(names) or not all(names):
        raise ValueError(
            f"--hooks {text!r} has an empty entry; give hook names or globs separated by commas, such as "
            "'blocks.*.hook_resid_post,blocks.0.attn.hook_z'"
        )
    for name in names:
        leaf = name.rsplit(".", 1)[-1]
        if not _GLOB_CHARS.search(name) and not leaf.startswith("hook_"):
            raise ValueError(
                f"--hooks {name!r} is not a hook name: hook names end in 'hook_...', such as "
                "'blocks.0.hook_resid_post' or 'blocks.0.attn.hook_z' (model.hook_names() lists them)"
            )
    check_per_token(names)
    return names


def check_args(args: argparse.Namespace) -> tuple[list[Any], list[str], str | list[int], dict[str, Any]]:
    """Everything about an ``interp cache`` command that can be checked before the model loads.

    Returns:
        The data items, the hook names, the positions and ``interp.load``'s placement keywords.
    """
    from interp.preflight import check_command, check_placement
    from interp.store import read_items
    from interp.store.batches import check_positions
    from interp.store.folder import check_folder

    placement = check_placement(args)  # the placement flags, before the model is looked for
    check_command(out=args.out, device=args.device, dtype=args.dtype, model=args.model, data=args.data)
    out = Path(args.out).expanduser()
    positions = check_positions(parse_positions(args.positions))
    items = read_items(args.data)
    hooks = parse_hooks(args.hooks)
    n_batches = -(-len(items) // args.batch_size)
    known = {
        "positions": positions,
        "batch_size": args.batch_size,
        "shard_rows": args.shard_rows,
        "data": {"kind": "texts", "n_items": len(items), "n_batches": n_batches},
    }  # the model, hooks, dtype and ranks are compared once the model is loaded
    check_folder(out, known, overwrite=bool(getattr(args, "overwrite", False)), keys=list(known))
    return items, hooks, positions, placement


def run(args: argparse.Namespace) -> int:
    """Check the command, then cache; under ``torchrun`` each rank takes its share of the batches."""
    from interp import distributed
    from interp.load import load
    from interp.store.cache import cache_activations

    items, hooks, positions, placement = check_args(args)
    with distributed.session():
        device = args.device
        if distributed.is_distributed() and (device is None or device == "cuda"):
            device = distributed.device()
        model = load(args.model, device=device, dtype=args.dtype, **placement)
        store = cache_activations(
            model,
            items,
            hooks,
            args.out,
            batch_size=args.batch_size,
            positions=positions,
            shard_rows=args.shard_rows,
            progress=not args.quiet,
            overwrite=bool(getattr(args, "overwrite", False)),
        )
        if distributed.rank() == 0:
            print(summary(store))
    return 0


def summary(store: Any) -> str:
    """One line: rows, hooks, shards, bytes, and this run's time and speed."""
    run = store.run
    mib = store.meta.get("bytes", 0) / 2**20
    line = (
        f"{store.folder}: {len(store)} rows x {len(store.hook_names)} hooks in {len(store.shards)} shards, "
        f"{mib:.1f} MiB"
    )
    if run is not None:
        speed = run.rows_written / run.seconds if run.seconds > 0 else 0.0
        line += f"; this run: {run.rows_written} rows in {run.seconds:.1f} s ({speed:,.0f} rows/s)"
    return line
