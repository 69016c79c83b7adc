"""``sae_lens.ActivationsStore`` over a local dataset: token rows and activations as SAELens's tutorials use them.

SAELens's store streams a dataset, forms rows of ``context_size`` tokens, runs the model to the SAE's hook and
serves the activations. This one does the same with what is on this machine:

- ``dataset`` is a local file (one text per line, JSONL with a ``text`` field, or parquet, read by
  :func:`interp.store.corpus.read_corpus`), a local folder ``datasets.load_dataset`` reads, or data already
  loaded (a ``datasets`` dataset, a list of texts or of records). A name that is not here is refused: interp
  downloads nothing.
- Rows are formed as SAELens forms them (:func:`~interp.compat.sae_lens.dataset_rows.concatenated_rows`):
  texts tokenized without special tokens and concatenated, a BOS at the start of every row when
  ``prepend_bos``, a separator (BOS by default) between documents that share a row, the unfinished last row
  dropped; a dataset of token rows (``tokens`` or ``input_ids``) is cut to ``context_size``. Running out of
  data starts it again from the beginning.
- ``get_batch_tokens`` gives ``[store_batch_size_prompts, context_size]`` rows; ``get_activations(tokens)`` the
  hook's activations ``[batch, pos, d_in]`` (heads flattened, or one head with ``hook_head_index``);
  ``next_batch()`` ``train_batch_size_tokens`` activations drawn without replacement from a shuffled buffer of
  ``n_batches_in_buffer`` batches (SAELens mixes old and new halves of its buffer; the order differs, the
  rows served are the same kind).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import torch

from interp.compat.sae_lens.dataset_rows import concatenated_rows, open_dataset, special_id

_TOKEN_COLUMNS = ("tokens", "input_ids")
_TEXT_COLUMNS = ("text", "problem")


class ActivationsStore:
    """Token rows and activations of one hook over a local dataset (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        dataset: Any,
        hook_name: str,
        context_size: int,
        d_in: int,
        prepend_bos: bool = True,
        hook_head_index: int | None = None,
        streaming: bool = True,
        store_batch_size_prompts: int = 8,
        train_batch_size_tokens: int = 4096,
        n_batches_in_buffer: int = 8,
        total_training_tokens: int = 10**9,
        normalize_activations: str = "none",
        device: str | torch.device = "cpu",
        dtype: str = "float32",
        seqpos_slice: tuple[int | None, ...] = (None,),
        disable_concat_sequences: bool = False,
        sequence_separator_token: int | str | None = "bos",
        model_kwargs: dict[str, Any] | None = None,
        dataset_trust_remote_code: bool | None = None,
    ) -> None:
        for name, value in (
            ("context_size", context_size),
            ("store_batch_size_prompts", store_batch_size_prompts),
            ("train_batch_size_tokens", train_batch_size_tokens),
            ("n_batches_in_buffer", n_batches_in_buffer),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}; it must be a positive integer")
        if disable_concat_sequences:
            raise ValueError(
                "disable_concat_sequences=True is not supported; rows here concatenate documents"
            )
        model.resolve(hook_name)  # an unknown hook fails here, with the closest names
        self.model = model
        self.dataset = open_dataset(dataset, streaming)
        self.hook_name = hook_name
        self.hook_head_index = hook_head_index
        self.context_size = context_size
        self.d_in = d_in
        self.prepend_bos = prepend_bos
        self.streaming = streaming
        self.store_batch_size_prompts = store_batch_size_prompts
        self.train_batch_size_tokens = train_batch_size_tokens
        self.n_batches_in_buffer = n_batches_in_buffer
        self.total_training_tokens = total_training_tokens
        self.normalize_activations = normalize_activations
        self.device = torch.device(device)
        self.dtype = getattr(torch, str(dtype).removeprefix("torch."))
        self.seqpos_slice = seqpos_slice
        self.model_kwargs = dict(model_kwargs or {})
        tokenizer = model.tokenizer
        self._bos_id = tokenizer.bos_id if prepend_bos else None
        self._separator_id = special_id(sequence_separator_token, tokenizer)
        self._backend = tokenizer.backend
        self.n_dataset_processed = 0
        self._rows = self._iterate_rows()
        self._buffer: torch.Tensor | None = None

    @classmethod
    def from_sae(
        cls,
        model: Any,
        sae: Any,
        dataset: Any = None,
        dataset_trust_remote_code: bool = False,
        context_size: int | None = None,
        streaming: bool = True,
        store_batch_size_prompts: int = 8,
        n_batches_in_buffer: int = 8,
        train_batch_size_tokens: int = 4096,
        total_tokens: int = 10**9,
        device: str = "cpu",
        disable_concat_sequences: bool = False,
        sequence_separator_token: int | str | None = "bos",
    ) -> ActivationsStore:
        """A store for ``sae``'s hook, context and BOS setting (from ``sae.cfg.metadata``)."""
        meta = sae.cfg.metadata
        context_size = context_size or meta.get("context_size")
        dataset = dataset if dataset is not None else meta.get("dataset_path")
        for name, value in (
            ("hook_name", meta.get("hook_name")),
            ("context_size", context_size),
            ("prepend_bos", meta.get("prepend_bos")),
            ("dataset", dataset),
        ):
            if value is None:
                raise ValueError(
                    f"the SAE's metadata has no {name}; pass it to ActivationsStore.from_sae or set "
                    f"sae.cfg.metadata.{name}"
                )
        return cls(
            model,
            dataset,
            hook_name=meta["hook_name"],
            hook_head_index=meta.get("hook_head_index"),
            context_size=context_size,
            d_in=sae.cfg.d_in,
            prepend_bos=meta["prepend_bos"],
            streaming=streaming,
            store_batch_size_prompts=store_batch_size_prompts,
            train_batch_size_tokens=train_batch_size_tokens,
            n_batches_in_buffer=n_batches_in_buffer,
            total_training_tokens=total_tokens,
            normalize_activations=sae.cfg.normalize_activations,
            device=device,
            dtype=sae.cfg.dtype,
            seqpos_slice=tuple(meta.get("seqpos_slice") or (None,)),
            disable_concat_sequences=disable_concat_sequences,
            sequence_separator_token=sequence_separator_token,
            dataset_trust_remote_code=dataset_trust_remote_code,
        )

    # -- tokens -----------------------------------------------------------------------------------------

    def _documents(self) -> Iterator[tuple[str, Any]]:
        for item in self.dataset:
            self.n_dataset_processed += 1
            if isinstance(item, str):
                yield "text", item
                continue
            for column in (*_TOKEN_COLUMNS, *_TEXT_COLUMNS):
                if column in item:
                    yield ("tokens" if column in _TOKEN_COLUMNS else "text"), item[column]
                    break
            else:
                raise ValueError(
                    f"a dataset row has columns {sorted(item)}; it needs one of {list(_TOKEN_COLUMNS + _TEXT_COLUMNS)}"
                )

    def _iterate_rows(self) -> Iterator[torch.Tensor]:
        documents = self._documents()
        first = next(documents, None)
        if first is None:
            return
        documents = itertools.chain([first], documents)
        if first[0] == "tokens":  # pretokenized rows, cut to the context
            for _, value in documents:
                row = torch.as_tensor(value, dtype=torch.long).reshape(-1)
                if len(row) < self.context_size:
                    raise ValueError(
                        f"a pretokenized row has {len(row)} tokens, fewer than context_size={self.context_size}"
                    )
                yield row[: self.context_size]
            return
        ids = (self._backend.encode(text, add_special_tokens=False).ids for _, text in documents)
        for row in concatenated_rows(ids, self.context_size, self._bos_id, self._separator_id):
            yield torch.tensor(row, dtype=torch.long)

    def get_batch_tokens(
        self,
        batch_size: int | None = None,
        raise_at_epoch_end: bool = False,
        move_to_model_device: bool = True,
    ) -> torch.Tensor:
        """``[batch_size, context_size]`` token rows (``store_batch_size_prompts`` by default)."""
        rows = []
        for _ in range(batch_size or self.store_batch_size_prompts):
            try:
                rows.append(next(self._rows))
            except StopIteration:
                self._rows = self._iterate_rows()
                if raise_at_epoch_end:
                    raise StopIteration(
                        f"the dataset ran out after {self.n_dataset_processed} rows"
                    ) from None
                try:
                    rows.append(next(self._rows))
                except StopIteration:
                    raise ValueError(f"the dataset gives no row of {self.context_size} tokens") from None
        tokens = torch.stack(rows)  # [batch, context]
        return tokens.to(self.model.device) if move_to_model_device else tokens

    # -- activations ------------------------------------------------------------------------------------

    @torch.no_grad()
    def get_activations(self, batch_tokens: torch.Tensor) -> torch.Tensor:
        """The hook's activations ``[batch, pos, d_in]`` for ``batch_tokens`` (heads flattened, or the one head
        of ``hook_head_index``), in the default float dtype on the store's device, as SAELens gives them."""
        layer = re.match(r"blocks\.(\d+)\.", self.hook_name)
        stop = int(layer.group(1)) + 1 if layer else None
        _, cache = self.model.run_with_cache(
            batch_tokens, names_filter=[self.hook_name], stop_at_layer=stop, **self.model_kwargs
        )
        acts = cache[self.hook_name][:, slice(*self.seqpos_slice)]
        if self.hook_head_index is not None:
            acts = acts[:, :, self.hook_head_index]
        acts = acts.reshape(*acts.shape[:2], -1)  # [batch, pos, d_in]
        if acts.shape[-1] != self.d_in:
            raise ValueError(
                f"{self.hook_name!r} has {acts.shape[-1]} features per position, but d_in={self.d_in}"
            )
        return acts.to(self.device, torch.get_default_dtype())

    def next_batch(self) -> torch.Tensor:
        """``[train_batch_size_tokens, d_in]`` activations from the shuffled buffer, refilled when it runs low."""
        if self._buffer is None or len(self._buffer) < self.train_batch_size_tokens:
            fresh = [
                self.get_activations(self.get_batch_tokens()).flatten(0, 1)
                for _ in range(self.n_batches_in_buffer)
            ]
            parts = ([] if self._buffer is None else [self._buffer]) + fresh
            buffer = torch.cat(parts)
            self._buffer = buffer[torch.randperm(len(buffer), device=buffer.device)]
            if len(self._buffer) < self.train_batch_size_tokens:
                raise ValueError(
                    f"the buffer holds {len(self._buffer)} activations, fewer than train_batch_size_tokens="
                    f"{self.train_batch_size_tokens}; raise n_batches_in_buffer or store_batch_size_prompts"
                )
        batch, self._buffer = (
            self._buffer[: self.train_batch_size_tokens],
            self._buffer[self.train_batch_size_tokens :],
        )
        return batch

    def __next__(self) -> torch.Tensor:
        return self.next_batch()

    def __iter__(self) -> ActivationsStore:
        return self

    def reset_input_dataset(self) -> None:
        """Start the dataset again from its beginning."""
        self._rows = self._iterate_rows()
