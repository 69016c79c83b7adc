"""Checkpoint tensors being converted, each taken exactly once with its shape checked.

A converter takes every tensor it understands, checking the shape that the config implies before reshaping,
so a config that contradicts its weights fails with the tensor's name instead of a cryptic reshape error.
Whatever is left at the end and is not on the family's ignore list raises: an unknown tensor means a variant
this loader does not understand, and dropping it silently would load a different model.

Tensors are handed out in the dtype the checkpoint stores them: the converters only split, join, transpose and
reshape, which are exact in any dtype (the one sum, BERT's position and token-type rows, is taken in float32),
so each weight is converted once, when it is assigned to the model in the dtype asked for
(:mod:`interp.load.assign`). Converting here, to float32, made a bfloat16 checkpoint loaded in
bfloat16 hold the file and a float32 copy of every weight at once (3.0x the weights).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import torch

from interp.load.errors import CheckpointError


class TensorSource:
    """Named tensors from one checkpoint, each taken once, in its stored dtype.

    Args:
        tensors: name -> tensor, in the checkpoint's own names (a GGUF file's, read as its family's Hugging
            Face names).
        source: the file or folder, named in errors.
        stored_as: a name asked for -> the name the file stores it under, or ``None`` where it has none of its
            own (a GGUF file's ``blk.1.ffn_down_exps.weight`` for ``model.layers.1.block_sparse_moe.experts.w2
            .weight``), so that a missing tensor is named as the file would name it. Default: the same name.
    """

    def __init__(
        self,
        tensors: dict[str, torch.Tensor],
        source: str,
        stored_as: Callable[[str], str | None] | None = None,
    ) -> None:
        self._tensors = dict(tensors)
        self.source = source
        self._stored_as = stored_as

    def file_name(self, name: str) -> str:
        """The name the file stores tensor ``name`` under (for errors): a GGUF file's own name where it has
        one, else ``name``."""
        stored = self._stored_as(name) if self._stored_as is not None else None
        return name if stored is None else stored

    def names(self) -> list[str]:
        """The names not yet taken."""
        return sorted(self._tensors)

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def strip_prefix(self, prefix: str) -> None:
        """Drop ``prefix`` from the names that have it (``bert.encoder...`` -> ``encoder...``)."""
        self._tensors = {
            (k[len(prefix) :] if k.startswith(prefix) else k): v for k, v in self._tensors.items()
        }

    def rename(self, pattern: str, replacement: str) -> None:
        """Rewrite names with a regular expression (e.g. old BERT's ``LayerNorm.gamma`` -> ``.weight``)."""
        self._tensors = {re.sub(pattern, replacement, k): v for k, v in self._tensors.items()}

    def put(self, name: str, tensor: torch.Tensor) -> None:
        """Add a tensor under ``name`` (a piece of a fused tensor, split by a converter)."""
        if name in self._tensors:
            raise CheckpointError(
                f"{self.source} has both a fused tensor and {name!r}; it is not one checkpoint"
            )
        self._tensors[name] = tensor

    def discard(self, prefixes: tuple[str, ...]) -> list[str]:
        """Drop the tensors whose names start with one of ``prefixes`` (parts of a checkpoint that are not
        the model being loaded, such as a vision tower); returns the names dropped."""
        dropped = [name for name in self._tensors if name.startswith(prefixes)]
        for name in dropped:
            del self._tensors[name]
        return dropped

    def take(self, name: str, shape: tuple[int, ...], meaning: str = "") -> torch.Tensor:
        """Remove and return tensor ``name`` (in its stored dtype), checking that it has ``shape``.

        Args:
            name: the checkpoint's tensor name.
            shape: the shape the config implies.
            meaning: how the config implies it (e.g. ``"num_heads * head_dim, hidden_size"``), for the error.
        """
        if name not in self._tensors:
            raise CheckpointError(
                f"{self.source} has no tensor {self.file_name(name)!r}; the checkpoint is incomplete or truncated"
            )
        tensor = self._tensors.pop(name)
        if tuple(tensor.shape) != tuple(shape):
            why = f" ({meaning})" if meaning else ""
            raise CheckpointError(
                f"tensor {name!r} in {self.source} has shape {list(tensor.shape)}, but the config implies "
                f"{list(shape)}{why}; the config does not match the weights"
            )
        return tensor

    def take_optional(self, name: str, shape: tuple[int, ...], meaning: str = "") -> torch.Tensor | None:
        """:meth:`take`, or ``None`` when the checkpoint has no such tensor."""
        return self.take(name, shape, meaning) if name in self._tensors else None

    def finish(self, ignore: Iterable[str] = ()) -> None:
        """Raise if a tensor is left that no pattern in ``ignore`` (regular expressions) matches."""
        patterns = [re.compile(p) for p in ignore]
        left = [n for n in sorted(self._tensors) if not any(p.fullmatch(n) for p in patterns)]
        if left:
            shown = ", ".join(repr(n) for n in left[:8]) + (
                f" and {len(left) - 8} more" if len(left) > 8 else ""
            )
            raise CheckpointError(
                f"{self.source} has tensors this loader does not understand: {shown}. It is probably a "
                "variant of the family (an extra head, adapters, a different layout) that is not supported; "
                "loading it without them would be a different model"
            )
        self._tensors.clear()
