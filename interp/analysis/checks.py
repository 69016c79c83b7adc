"""Input checks shared by the analysis functions: errors that say what was wrong and what would be right."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

import torch

from hooks import ActivationCache


class MissingHooksError(KeyError):
    """A cache lacks activations that an analysis needs; the message lists them and how to capture them."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def require_hooks(cache: ActivationCache, names: Iterable[str], purpose: str, fix: str) -> None:
    """Raise :class:`MissingHooksError` naming every hook in ``names`` that ``cache`` lacks.

    Args:
        purpose: what needs them, e.g. ``"decompose_resid(layer=2, where='pre')"``.
        fix: how to capture them, e.g. ``"names_filter=decompose_names(model, 2, 'pre')"``.
    """
    missing = [name for name in names if name not in cache]
    if missing:
        shown = ", ".join(repr(n) for n in missing[:6]) + (
            f" and {len(missing) - 6} more" if len(missing) > 6 else ""
        )
        raise MissingHooksError(
            f"{purpose} needs hooks that are not in this cache: {shown}; "
            f"run model.run_with_cache(tokens, {fix}) to capture them"
        )


def check_index(value: int, size: int, what: str, of: str) -> int:
    """``value`` as a non-negative index into ``size`` items (negatives count from the end), or a clear error.

    >>> check_index(-1, 8, "position", "a sequence of 8 tokens")
    7
    """
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    try:
        value = operator.index(value)  # ints, numpy integers, 0-d integer tensors
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r}") from None
    if not -size <= value < size:
        raise IndexError(f"{what} {value} is out of range for {of}; use 0..{size - 1} (or -{size}..-1)")
    return value % size


def check_indices(values: int | Sequence[int] | None, size: int, what: str, of: str) -> list[int]:
    """A list of checked indices; ``None`` means all of them."""
    if values is None:
        return list(range(size))
    if isinstance(values, (int, torch.Tensor)) and not (isinstance(values, torch.Tensor) and values.ndim):
        values = [values]
    return [check_index(v, size, what, of) for v in values]


def check_layer(model, layer: int, *, allow_end: bool = False) -> int:
    """A checked block index; ``allow_end`` admits ``n_layers`` (the stream after the last block)."""
    n = model.cfg.n_layers
    size = n + 1 if allow_end else n
    of = f"a model with {n} layers" + (" (n_layers itself means the final stream)" if allow_end else "")
    return check_index(layer, size, "layer", of)


def check_same_shape(clean: torch.Tensor, corrupt: torch.Tensor) -> None:
    """Patching copies activations position by position, so both runs need the same ``[batch, pos]``."""
    if tuple(clean.shape) != tuple(corrupt.shape):
        raise ValueError(
            f"clean tokens have shape {tuple(clean.shape)} but corrupt tokens have shape "
            f"{tuple(corrupt.shape)}; patching needs the same [batch, pos] on both sides (pad the shorter "
            "one and pass attention_mask)"
        )
