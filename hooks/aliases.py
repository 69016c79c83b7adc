"""Hook aliases: second names for existing hook points, never second hook points.

A model may answer to the names another library gives its activations (TransformerLens 3 calls the stream
entering block 3 ``blocks.3.hook_in``; interp calls it ``blocks.3.hook_resid_pre``). An alias is only a name:
it resolves to the very :class:`~hooks.point.HookPoint` of its canonical name, so a hook added under one fires
under the other, once, and ``hook.name`` is always the canonical name. (A copy of the point placed elsewhere
could fire at a different place than its twin, which is a bug TransformerLens itself had.)

Some foreign names have no hook point here at all; ``missing`` maps them to a message that says what to use
instead, so that asking for one fails with that line rather than a list of close spellings.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hooks.names import _GLOB_CHARS, NamesFilter, UnknownHookError, resolve_names


@dataclass(frozen=True)
class HookAliases:
    """``names``: alias -> canonical hook name; ``missing``: a foreign name -> why it has no hook point here."""

    names: Mapping[str, str] = field(default_factory=dict)
    missing: Mapping[str, str] = field(default_factory=dict)

    def canonical(self, name: str) -> str:
        """The canonical name of ``name`` (itself when it is no alias); raises for a name listed as missing."""
        if name in self.missing:
            raise UnknownHookError(self.missing[name])
        return self.names.get(name, name)

    def resolve(self, names_filter: NamesFilter, valid: Sequence[str]) -> list[str]:
        """Like :func:`~hooks.names.resolve_names`, with aliases accepted wherever a name is.

        A glob or a predicate sees canonical names and aliases alike; what it selects is mapped to canonical
        names, each once, in the model's order.
        """
        if not self.names and not self.missing:
            return resolve_names(names_filter, valid)
        if callable(names_filter):
            by_target: dict[str, list[str]] = {}
            for alias, target in self.names.items():
                by_target.setdefault(target, []).append(alias)
            chosen = [
                n for n in valid if names_filter(n) or any(names_filter(a) for a in by_target.get(n, ()))
            ]
            if not chosen:
                raise ValueError(f"the names filter {names_filter!r} matches no hook; see model.hook_names()")
            return chosen
        if names_filter is None or not isinstance(names_filter, (str, list, tuple)):
            return resolve_names(names_filter, valid)
        patterns = [names_filter] if isinstance(names_filter, str) else list(names_filter)
        translated: list[str] = []
        for pattern in patterns:
            if isinstance(pattern, str) and _GLOB_CHARS.search(pattern):
                targets = [self.names[hit] for hit in fnmatch.filter(self.names, pattern)]
                translated += targets
                if not targets or fnmatch.filter(valid, pattern):
                    translated.append(pattern)  # a pattern nothing matches still raises below
            else:
                translated.append(self.canonical(pattern) if isinstance(pattern, str) else pattern)
        return resolve_names(translated, valid)
