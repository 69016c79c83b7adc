"""The inputs that attribution and interventions share: a prompt as ids with a special token first, and
transcoders that fit the model and replace every MLP (kept apart from :mod:`.attribute` so that interventions,
which a graph runs, do not import the module that builds graphs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from interp.dictionary import SparseDictionary, check_fits


def prompt_ids(model: Any, prompt: str | torch.Tensor | Sequence[int]) -> torch.Tensor:
    """The prompt as ids ``[pos]`` starting with a special token, as circuit-tracer makes it: text is encoded
    without special tokens, and where the model has a tokenizer and the first id is not one of its special
    tokens, its BOS (else its padding, else its end-of-sequence) token is put first."""
    tokenizer = getattr(model, "tokenizer", None)
    if isinstance(prompt, str):
        ids = model.to_tokens(prompt, prepend_bos=False).ids[0]
    else:
        ids = torch.as_tensor(prompt, dtype=torch.long).flatten().to(model.embed.W_E.device)
    if tokenizer is not None and len(ids):
        special = [i for i in (tokenizer.bos_id, tokenizer.pad_id, tokenizer.eos_id) if i is not None]
        if special and int(ids[0]) not in special:
            ids = torch.cat([ids.new_tensor([special[0]]), ids])
    return ids


def check_fit(model: Any, transcoders: SparseDictionary) -> None:
    """Raise one line when ``transcoders`` do not fit ``model`` or leave an MLP unreplaced."""
    check_fits(model, transcoders)
    n_layers = model.cfg.n_layers
    if list(transcoders.layers) != list(range(n_layers)):
        raise ValueError(
            f"an attribution graph replaces every MLP, but the transcoders have features at layers "
            f"{list(transcoders.layers)} only, not at all {n_layers}"
        )
