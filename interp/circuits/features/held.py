"""The model held at a clean run's values: constrained interventions and head loadings.

Where the frozen pass (:mod:`~interp.circuits.features.frozen`) detaches the live patterns and norm divisors of
one run, a held model runs again with every pattern, norm divisor and transcoder output replaced by its value
on a clean run of the prompt, so an edit made in the run moves only what the attribution graph describes:
its direct, linear effect (:func:`~interp.circuits.features.intervene.intervene` with ``constrained=True``,
:func:`~interp.circuits.features.heads.head_loadings`). The skip connection follows its live input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from interp.circuits.features.frozen import FROZEN_SUFFIXES
from interp.dictionary import SparseDictionary, written_layers


@dataclass
class Held:
    """The model held at a clean run's values (see the module docstring).

    ``constant_hooks`` are the patterns and norm divisors, constants of the held model; ``clean`` caches them
    and every transcoder input and output of one clean forward; :meth:`hooks` hold those at their clean values
    in later forwards, except that the skip connection follows its (live) input. ``seen`` collects the live
    transcoder inputs; with ``leaves``, each held output is a leaf tensor stored there, so gradients can be
    taken with respect to it.
    """

    constant_hooks: list[str]
    inputs: dict[str, int]
    outputs: dict[str, int]
    clean: Any = None
    seen: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def run(cls, model: Any, transcoders: SparseDictionary, tokens: torch.Tensor) -> Held:
        """Cache ``tokens [pos]``'s clean run."""
        tc = transcoders
        held = cls(
            constant_hooks=[n for n in model.hook_names() if n.endswith(FROZEN_SUFFIXES)],
            inputs={tc.input_hook(layer): layer for layer in tc.layers},
            outputs={tc.output_hook(out): out for out in written_layers(tc)},
        )
        names = [*held.constant_hooks, *held.inputs, *held.outputs, "hook_embed"]
        with torch.no_grad():
            _, held.clean = model.run_with_cache(tokens[None], names_filter=names)
        return held

    def hooks(
        self, transcoders: SparseDictionary, leaves: dict[str, torch.Tensor] | None = None
    ) -> list[tuple[str, Callable]]:
        """Forward hooks holding the model at the clean values (see the class docstring)."""
        tc, clean = transcoders, self.clean

        def hook(x: torch.Tensor, hook: Any) -> torch.Tensor | None:
            name = hook.name
            if name in self.constant_hooks:
                return clean[name].expand_as(x).clone()
            if name in self.inputs:
                self.seen[name] = x
                return None
            if name in self.outputs:
                layer = self.outputs[name]
                x_in = tc.input_hook(layer)
                out = clean[name].expand_as(x).clone()
                if leaves is not None:
                    out = leaves[name] = out.requires_grad_(True)
                live, before = tc.skip(self.seen[x_in], layer), tc.skip(clean[x_in], layer)
                return out if live is None else out + (live - before).to(out.dtype)
            return None

        return [(n, hook) for n in dict.fromkeys([*self.constant_hooks, *self.inputs, *self.outputs])]
