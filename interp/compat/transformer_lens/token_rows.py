"""``utils.tokenize_and_concatenate``: a text dataset as rows of tokens of one length, as TransformerLens cuts them.

SAELens tutorials and TransformerLens notebooks build their token batches this way: the texts of each
``datasets.map`` batch (1000 documents by default) are tokenized without special tokens, joined with the EOS id
between documents, cut into rows of ``max_length`` (one less when a BOS column is added), and the remainder is
dropped; a map batch too short for one row is padded to one row. The result is a ``datasets.Dataset`` (or the
``IterableDataset`` given) with one column, ``tokens``, in torch format. It takes any Hugging Face tokenizer,
the face's ``model.tokenizer`` included.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def tokenize_and_concatenate(
    dataset: Any,
    tokenizer: Any,
    streaming: bool = False,
    max_length: int = 1024,
    column_name: str = "text",
    add_bos_token: bool = True,
    num_proc: int | None = 10,
    set_format: bool = True,
) -> Any:
    """Rows ``[n, max_length]`` of the dataset's texts, concatenated with EOS between documents.

    Args:
        dataset: a ``datasets.Dataset`` or ``IterableDataset`` with a text column.
        tokenizer: a Hugging Face tokenizer with an EOS token (and a BOS token for ``add_bos_token``).
        streaming: map without worker processes (an ``IterableDataset`` takes none).
        max_length: tokens per row, the BOS included.
        column_name: the column holding the texts; every other column is dropped.
        add_bos_token: start every row with the BOS id.
        num_proc: worker processes for ``map`` (``None``: in this process).
        set_format: give ``tokens`` as torch tensors.

    Raises:
        ValueError: the column is missing, the tokenizer lacks the EOS (or BOS) token, or ``max_length`` leaves
            no room for text.
    """
    columns = list(getattr(dataset, "column_names", None) or getattr(dataset, "features", None) or [])
    if columns and column_name not in columns:
        raise ValueError(f"the dataset has columns {columns}; there is no text column {column_name!r}")
    if tokenizer.eos_token_id is None:
        raise ValueError(
            "tokenize_and_concatenate joins documents with the EOS token, and this tokenizer has none"
        )
    if add_bos_token and tokenizer.bos_token_id is None:
        raise ValueError("add_bos_token=True, but this tokenizer has no BOS token; pass add_bos_token=False")
    row_length = max_length - 1 if add_bos_token else max_length
    if row_length < 1:
        raise ValueError(
            f"max_length={max_length} leaves no room for text; give at least {2 if add_bos_token else 1}"
        )
    others = [name for name in columns if name != column_name]
    if others:
        dataset = dataset.remove_columns(others)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def rows(batch: dict[str, list[str]]) -> dict[str, np.ndarray]:
        texts = batch[column_name]
        if not texts:
            return {"tokens": np.zeros((0, max_length), dtype=np.int64)}
        eos = [tokenizer.eos_token_id]
        docs = tokenizer(texts, add_special_tokens=False)["input_ids"]
        joined = np.asarray(
            [t for i, doc in enumerate(docs) for t in ([*eos, *doc] if i else doc)], dtype=np.int64
        )
        if len(joined) < row_length:
            joined = np.concatenate([joined, np.full(row_length - len(joined), pad_id, dtype=np.int64)])
        n_rows = len(joined) // row_length
        tokens = joined[: n_rows * row_length].reshape(n_rows, row_length)  # [row, row_length]
        if add_bos_token:
            tokens = np.concatenate(
                [np.full((n_rows, 1), tokenizer.bos_token_id, dtype=np.int64), tokens], axis=1
            )
        return {"tokens": tokens}

    workers = {} if streaming else {"num_proc": num_proc}
    mapped = dataset.map(rows, batched=True, remove_columns=[column_name], **workers)
    if set_format:
        mapped.set_format(type="torch", columns=["tokens"])
    return mapped
