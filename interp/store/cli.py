"""``interp cache``: the command-line shell over :func:`interp.store.cache_activations`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from interp import distributed

JSONL_SUFFIXES = (".jsonl", ".ndjson")


def read_items(path: str | Path) -> list[Any]:
    """The items of a data file: JSONL records (``.jsonl``: ``text``/``sentence``/``prompt``, optional
    ``id``), or one text per non-blank line of any other file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--data {path} does not exist")
    lines = path.read_text(encoding="utf-8").splitlines()
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


def cache_main(args: argparse.Namespace) -> int:
    """Run ``interp cache``; under ``torchrun`` each rank takes its share of the batches."""
    from interp.load import load
    from interp.store.cache import cache_activations

    with distributed.session():
        items = read_items(args.data)
        device = args.device
        if distributed.is_distributed() and (device is None or device == "cuda"):
            device = distributed.device()
        model = load(args.model, device=device, dtype=args.dtype)
        hooks = [h.strip() for h in args.hooks.split(",") if h.strip()]
        store = cache_activations(
            model,
            items,
            hooks,
            args.out,
            batch_size=args.batch_size,
            positions=parse_positions(args.positions),
            shard_rows=args.shard_rows,
            progress=not args.quiet,
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
