"""``interp cache``: the command-line shell over :func:`interp.store.cache_activations`.

Everything that can be checked without the model is checked before it loads: the output folder (a file, a
place nothing can be created, a folder of other files, a store with other settings), the data file (every
line), the flags, the device and dtype, and the hook names as far as their spelling goes.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from interp import distributed

JSONL_SUFFIXES = (".jsonl", ".ndjson")
_GLOB_CHARS = re.compile(r"[*?\[]")


def read_items(path: str | Path) -> list[Any]:
    """The items of a data file: JSONL records (``.jsonl``: ``text``/``sentence``/``prompt``, optional
    ``id``), or one text per non-blank line of any other file."""
    from interp.store.batches import TEXT_FIELDS

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--data {path} is a folder; pass a text or JSONL file")
    if not path.is_file():
        raise FileNotFoundError(f"--data {path} does not exist")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"--data {path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    if path.suffix not in JSONL_SUFFIXES:
        items = [line for line in lines if line.strip()]
    else:
        items = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number} is not valid JSON ({err.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(
                    f"{path}:{number} is a JSON {type(record).__name__}; each line must be an object"
                )
            if not any(isinstance(record.get(key), str) for key in TEXT_FIELDS):
                raise ValueError(
                    f"{path}:{number} has no text: each record needs a string field "
                    f"{' or '.join(map(repr, TEXT_FIELDS))}; its keys are {sorted(record)}"
                )
            items.append(record)
    if not items:
        raise ValueError(f"{path} holds no items")
    return items


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


def check_args(args: argparse.Namespace) -> tuple[list[Any], list[str], str | list[int]]:
    """Everything about an ``interp cache`` command that can be checked before the model loads.

    Returns:
        The data items, the hook names and the positions.
    """
    from interp.load.instantiate import parse_device, parse_dtype
    from interp.preflight import check_output_folder
    from interp.store.batches import check_positions
    from interp.store.folder import check_folder

    out = check_output_folder(args.out, flag="--out")
    positions = check_positions(parse_positions(args.positions))
    items = read_items(args.data)
    hooks = parse_hooks(args.hooks)
    parse_device(args.device)
    parse_dtype(args.dtype)
    n_batches = -(-len(items) // args.batch_size)
    known = {
        "positions": positions,
        "batch_size": args.batch_size,
        "shard_rows": args.shard_rows,
        "data": {"kind": "texts", "n_items": len(items), "n_batches": n_batches},
    }  # the model, hooks, dtype and ranks are compared once the model is loaded
    check_folder(out, known, overwrite=bool(getattr(args, "overwrite", False)), keys=list(known))
    return items, hooks, positions


def cache_main(args: argparse.Namespace) -> int:
    """Run ``interp cache``; under ``torchrun`` each rank takes its share of the batches."""
    from interp.load import load
    from interp.preflight import check_placement
    from interp.store.cache import cache_activations

    items, hooks, positions = check_args(args)
    placement = check_placement(args)
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
