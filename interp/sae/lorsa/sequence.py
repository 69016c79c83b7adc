"""The real tokens of the forward pass under way, for a Lorsa spliced into a model.

A Lorsa head reads every earlier position of its sequence, so a splice must tell it which positions of the
batch are real: a left-padded sequence's padding must be neither attended to nor counted as a position. Hooks
see tensors only, so while a Lorsa is spliced, :class:`ForwardTokens` watches the model's own calls (a forward
pre-hook) and keeps the mask of each: the one given with token ids, or the one the model makes for text
(``model.to_tokens``, as its forward does).

A forward with a KV cache runs only the new positions, whose heads would need the keys and values of the
cached ones; it is refused in one line (generate with ``use_kv_cache=False`` to run a spliced Lorsa).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import torch


class ForwardTokens:
    """``valid [batch, pos]`` of the forward under way (``None``: every token real, or no model watched)."""

    def __init__(self) -> None:
        self.valid: torch.Tensor | None = None
        self._depth = 0

    @contextlib.contextmanager
    def watching(self, model: Any) -> Iterator[None]:
        """Record the mask of each of ``model``'s forward calls for the ``with`` block (nothing for a model that
        takes no ``attention_mask``)."""
        forward = getattr(model, "forward", None)
        try:
            signature = inspect.signature(forward)
        except (TypeError, ValueError):
            signature = None
        if (
            signature is None
            or "attention_mask" not in signature.parameters
            or not hasattr(model, "to_tokens")
        ):
            yield
            return

        def record(module: Any, args: tuple, kwargs: dict) -> None:
            call = signature.bind(*args, **kwargs).arguments
            if call.get("kv_cache") is not None:
                raise ValueError(
                    "a spliced Lorsa computes each head over the whole sequence, but this forward runs only new "
                    "positions against a KV cache; generate with use_kv_cache=False"
                )
            tokens, mask = call.get("tokens"), call.get("attention_mask")
            if isinstance(tokens, (str, list)):
                mask = model.to_tokens(tokens).mask
            self.valid = None if mask is None or bool(mask.all()) else mask.bool()

        handle = model.register_forward_pre_hook(record, with_kwargs=True)
        self._depth += 1
        try:
            yield
        finally:
            handle.remove()
            self._depth -= 1
            if not self._depth:
                self.valid = None

    def of(self, x: torch.Tensor) -> torch.Tensor | None:
        """The mask for an input hook's tensor ``x [batch, pos, ...]`` of this forward (``None``: all real)."""
        if self.valid is None:
            return None
        if tuple(self.valid.shape) != tuple(x.shape[:2]):
            raise RuntimeError(
                f"the forward's attention mask has shape {tuple(self.valid.shape)}, but the Lorsa's input has "
                f"[batch, pos] = {tuple(x.shape[:2])}; was the model called inside another model's forward?"
            )
        return self.valid.to(x.device)
