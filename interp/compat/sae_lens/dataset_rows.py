"""A local dataset as SAELens's ``ActivationsStore`` reads it: rows to iterate, and token rows formed from texts.

SAELens's store loads ``dataset`` by name with ``datasets.load_dataset``; here a name must be a file or folder on
this machine (:func:`open_dataset`). Its rows of ``context_size`` tokens are formed as SAELens forms them
(:func:`concatenated_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from interp.store.corpus import read_corpus


def concatenated_rows(
    documents: Iterable[list[int]], context_size: int, bos_id: int | None, separator_id: int | None
) -> Iterator[list[int]]:
    """Rows of exactly ``context_size`` ids from documents of ids, as SAELens's ``ActivationsStore`` forms them.

    A row starts with ``bos_id`` unless its first id already is it; a document that starts inside a row is
    preceded by ``separator_id`` unless it already starts with it; a document longer than the rest of a row goes
    on in the next row (which starts with BOS again). The unfinished last row is not yielded.

    >>> list(concatenated_rows([[5, 6, 7], [8, 9]], 4, bos_id=0, separator_id=0))
    [[0, 5, 6, 7], [0, 0, 8, 9]]
    """
    if context_size < (2 if bos_id is not None else 1):
        raise ValueError(f"context_size={context_size} leaves no room for text after the BOS token")
    row: list[int] = []
    for doc in documents:
        start = 0
        while start < len(doc):
            if not row:
                if bos_id is not None and doc[start] != bos_id:
                    row.append(bos_id)
            elif start == 0 and separator_id is not None and doc[0] != separator_id:
                row.append(separator_id)
            take = context_size - len(row)
            row.extend(doc[start : start + take])
            start += take
            if len(row) == context_size:
                yield row
                row = []


def special_id(token: int | str | None, tokenizer: Any) -> int | None:
    if token is None or isinstance(token, int):
        return token
    ids = {"bos": tokenizer.bos_id, "eos": tokenizer.eos_id, "sep": getattr(tokenizer, "sep_token_id", None)}
    if token not in ids:
        raise ValueError(f"sequence_separator_token={token!r}; expected 'bos', 'eos', 'sep', an id or None")
    return ids[token]


def open_dataset(dataset: Any, streaming: bool) -> Iterable[Any]:
    """Rows to iterate: a loaded dataset as it is, a local file's texts, or a local folder through ``datasets``."""
    if not isinstance(dataset, (str, Path)):
        if dataset is None or not isinstance(dataset, Iterable):
            raise TypeError(
                f"dataset is {type(dataset).__name__}; give a local file or folder, or loaded data"
            )
        return dataset
    path = Path(dataset).expanduser()
    if path.is_file():
        return read_corpus(path)
    if path.is_dir():
        try:
            import datasets
        except ImportError as err:
            raise ValueError(
                f"reading the dataset folder {path} needs the datasets library ({err})"
            ) from None
        return datasets.load_dataset(str(path), split="train", streaming=streaming)
    raise FileNotFoundError(
        f"dataset {str(dataset)!r} is not a file or folder on this machine, and interp does not download: give a "
        "local text, JSONL or parquet file, a folder datasets.load_dataset reads, or loaded data"
    )
