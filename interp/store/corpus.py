"""Data files as texts: the items of a data set, the texts of a corpus, and token windows cut from them.

``interp cache``, ``interp dashboards`` and ``interp sae train`` (and the studies that train dictionaries) read
their data through here, one reader of text files (:func:`read_items`), so a file is refused for the same
reasons, in the same words, wherever it is read: not there, a folder, not UTF-8, binary (a NUL byte), a JSONL
line that is not an object with a text field, or nothing left to read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from interp.store.batches import TEXT_FIELDS

JSONL_SUFFIXES = (".jsonl", ".ndjson")


def read_items(path: str | Path) -> list[Any]:
    """The items of a data file: JSONL records (``.jsonl``: ``text``/``sentence``/``prompt``, optional
    ``id``), or one text per non-blank line of any other file."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--data {path} is a folder; pass a text or JSONL file")
    if not path.is_file():
        raise FileNotFoundError(f"--data {path} does not exist")
    lines = _text(path).splitlines()
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
        items = read_items(path)
        texts = [item if isinstance(item, str) else item.get("text") for item in items]
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"{path}: item {bad[0]} has no text (each needs a 'text' string)")
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError(f"--data {path} holds no text; give a file with at least one non-blank line")
    return texts


def _text(path: Path) -> str:
    """The file's text: UTF-8, and no NUL byte (which no text file holds: a binary file, or one in UTF-16)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"--data {path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise ValueError(
            f"--data {path} holds a NUL byte (line {line}, byte {len(text[:nul].encode())}): it is a binary file, "
            "not text; give UTF-8 text, one item a line, or JSONL with a 'text' field"
        )
    return text


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
