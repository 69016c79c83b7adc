"""Turning what a user wrote (a name, a glob, a list, a predicate) into hook names, or a helpful error.

Nothing is ever silently not captured: an unknown name raises with the closest valid names, and a filter that
matches nothing raises too.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

NamesFilter = str | Sequence[str] | Callable[[str], bool] | None

_GLOB_CHARS = re.compile(r"[*?\[]")
_LAYER = re.compile(r"(?:^|\.)(?:blocks|layers|layer|h)\.(\d+)\.")


class UnknownHookError(KeyError):
    """A hook name that the model does not have."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class LayerIndex(int):
    """A block index that can also be called, so ``hook.layer`` and TransformerLens's ``hook.layer()`` both
    give it."""

    def __call__(self) -> int:
        return int(self)


def layer_of(name: str) -> LayerIndex | None:
    """The block index in a hook name (``blocks.3.attn.hook_q`` -> 3), or ``None``."""
    match = _LAYER.search(name)
    return LayerIndex(match.group(1)) if match else None


def unknown_hook_message(name: str, valid: Iterable[str]) -> str:
    valid = list(valid)
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
    if not close:
        tail = name.rsplit(".", 1)[-1]
        close = [v for v in valid if v.endswith("." + tail) or v == tail][:3]
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else "; see model.hook_names()"
    return f"unknown hook {name!r}{hint}"


def resolve_names(names_filter: NamesFilter, valid: Sequence[str]) -> list[str]:
    """The hook names that ``names_filter`` selects, in the model's order.

    Args:
        names_filter: ``None`` (every hook), a name, a glob such as ``"blocks.*.attn.hook_pattern"``, a list
            of names or globs, or a predicate ``fn(name) -> bool``.
        valid: all hook names of the model.

    Raises:
        UnknownHookError: a plain name (not a glob) is not a hook.
        ValueError: the filter selects nothing.
    """
    if names_filter is None:
        return list(valid)
    if callable(names_filter):
        chosen = [n for n in valid if names_filter(n)]
        if not chosen:
            raise ValueError(f"the names filter {names_filter!r} matches no hook; see model.hook_names()")
        return chosen
    if not isinstance(names_filter, (str, Iterable)) or isinstance(names_filter, (bytes, Mapping)):
        raise TypeError(
            f"names_filter={names_filter!r} ({type(names_filter).__name__}) is not a names filter; pass None "
            "(every hook), a name or glob such as 'blocks.*.attn.hook_pattern', a list of them, or "
            "fn(name) -> bool"
        )
    patterns = [names_filter] if isinstance(names_filter, str) else list(names_filter)
    if not patterns:
        raise ValueError("the names filter is an empty list; pass None to select every hook")
    valid_set = set(valid)
    selected: set[str] = set()
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise TypeError(
                f"names_filter holds {pattern!r} ({type(pattern).__name__}); its entries must be hook "
                "names or globs (strings)"
            )
        if _GLOB_CHARS.search(pattern):
            hits = fnmatch.filter(valid, pattern)
            if not hits:
                raise ValueError(f"the pattern {pattern!r} matches no hook; see model.hook_names()")
            selected.update(hits)
        elif pattern in valid_set:
            selected.add(pattern)
        else:
            raise UnknownHookError(unknown_hook_message(pattern, valid))
    return [n for n in valid if n in selected]
