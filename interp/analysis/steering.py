"""Steering vectors: a direction in an activation space, found by contrast and added back to steer the model.

A steering vector is the mean difference of one activation between paired prompts that differ in the property
to steer (she / he, formal / casual), read at one position of each prompt: activation addition (Turner et al.
2023) and contrastive activation addition (Rimsky et al. 2024) use exactly this. Adding ``scale`` times it to
the same activation of another prompt moves that prompt's representation toward the positive side.

A vector remembers the hook it was read at and the model it came from (its name, shape and a few rows of its
embedding matrix, which survive a change of dtype), and it is saved as safetensors with both. Applying it to
another model, or to a hook of another width, raises before anything runs.

Example:
    >>> vec = steering_vector(model, ["Mary said"], ["John said"], "blocks.6.hook_resid_pre")  # doctest: +SKIP
    >>> out = model.generate("My friend said that", 20, fwd_hooks=[vec.hook(4.0, positions="new")])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from hooks.names import layer_of
from interp.analysis.steering_checks import activation_shape, check_width, identity_problem, model_identity

FORMAT = "interp.steering_vector"
Positions = str | int | Sequence[int | str]


@dataclass(frozen=True, kw_only=True, eq=False)
class SteeringVector:
    """A direction to add at one hook of one model.

    Attributes:
        vector: FloatTensor of the activation's shape after ``[batch, pos]`` (``[d_model]`` on the stream,
            ``[head, d_head]`` on ``hook_z``).
        hook_name: where it was read, and where :meth:`hook` adds it.
        model: the model's identity: ``name``, ``n_layers``, ``d_model``, ``d_vocab`` and ``probe``, a few rows
            of its embedding matrix.
        position: where in each prompt it was read (``"last"``, ``"mean"`` or an index).
        n_pairs: prompt pairs averaged.
    """

    vector: torch.Tensor
    hook_name: str
    model: dict[str, Any]
    position: str | int = "last"
    n_pairs: int = 0

    @property
    def norm(self) -> float:
        return float(self.vector.float().norm())

    def hook(self, scale: float = 1.0, positions: Positions = "all") -> tuple[str, Steer]:
        """``(hook_name, steer(self, scale, positions))``, ready for ``fwd_hooks``."""
        return self.hook_name, steer(self, scale, positions)

    def with_vector(self, vector: torch.Tensor) -> SteeringVector:
        """Another vector at the same hook and model (e.g. a random control of equal norm)."""
        return SteeringVector(
            vector=vector, hook_name=self.hook_name, model=self.model, position=self.position, n_pairs=0
        )

    def check(self, model: Any, hook_name: str | None = None) -> None:
        """Raise ``ValueError`` if this vector was made for another model or does not fit ``hook_name``."""
        problem = identity_problem(self.model, model)
        if problem is not None:
            raise ValueError(f"steering vector for {self.hook_name!r}: {problem}")
        check_width(model, hook_name or self.hook_name, self.vector)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the vector and what it belongs to as one safetensors file."""
        metadata = {
            "format": FORMAT,
            "hook_name": self.hook_name,
            "position": json.dumps(self.position),
            "n_pairs": str(self.n_pairs),
            "model": json.dumps({k: v for k, v in self.model.items() if k != "probe"}),
        }
        tensors = {"vector": self.vector.detach().cpu().contiguous()}
        if self.model.get("probe") is not None:
            tensors["probe"] = self.model["probe"].contiguous()
        save_file(tensors, str(path), metadata=metadata)

    @classmethod
    def load(cls, path: str | os.PathLike[str], model: Any = None) -> SteeringVector:
        """Read a vector written by :meth:`save`; with ``model``, check that it belongs to it.

        Raises:
            FileNotFoundError: No file at ``path``.
            ValueError: The file is not a steering vector file (not safetensors, truncated, or written by
                something else); the message names it.
        """
        if not Path(path).is_file():
            raise FileNotFoundError(f"no steering vector file {str(path)!r}")
        try:
            with safe_open(str(path), framework="pt") as handle:
                metadata = handle.metadata() or {}
        except Exception as err:  # safetensors raises its own SafetensorError for a file it cannot parse
            raise ValueError(
                f"{str(path)!r} is not a steering vector file: it cannot be read as safetensors ({err}); "
                "write one with SteeringVector.save"
            ) from None
        if metadata.get("format") != FORMAT:
            raise ValueError(
                f"{str(path)!r} is not a steering vector file (no {FORMAT!r} metadata); write one with "
                "SteeringVector.save"
            )
        tensors = load_file(str(path))
        identity = json.loads(metadata["model"])
        identity["probe"] = tensors.get("probe")
        vector = cls(
            vector=tensors["vector"],
            hook_name=metadata["hook_name"],
            model=identity,
            position=json.loads(metadata["position"]),
            n_pairs=int(metadata["n_pairs"]),
        )
        if model is not None:
            vector.check(model)
        return vector


def load_steering_vector(path: str | os.PathLike[str], model: Any = None) -> SteeringVector:
    """:meth:`SteeringVector.load`."""
    return SteeringVector.load(path, model)


class Steer:
    """A hook that adds ``scale * vector`` at some positions: build it with :func:`steer`."""

    def __init__(self, vector: torch.Tensor, scale: float, positions: Positions, identity: dict | None):
        if not math.isfinite(float(scale)):
            raise ValueError(f"steering scale {scale!r} is not a finite number; give one such as 4.0 or -2")
        if not bool(torch.isfinite(vector).all()):
            bad = int((~torch.isfinite(vector)).sum())
            raise ValueError(
                f"the steering vector holds {bad} NaN or infinite value(s) of {vector.numel()}; "
                "steering with it would turn every activation it touches into NaN"
            )
        self.vector = vector.detach()
        self.scale = float(scale)
        self.all, self.new, self.indices = _parse_positions(positions)
        self.identity = identity
        self._cast: dict[tuple, torch.Tensor] = {}
        self.__name__ = "steer"

    def check_model(self, model: Any, hook_name: str) -> None:
        """Called by ``generate`` before it runs: the vector must fit this hook of this model."""
        if self.identity is not None:
            problem = identity_problem(self.identity, model)
            if problem is not None:
                raise ValueError(f"steering vector at {hook_name!r}: {problem}")
        check_width(model, hook_name, self.vector)

    def __call__(self, x: torch.Tensor, hook: Any) -> torch.Tensor:
        if tuple(x.shape[2:]) != tuple(self.vector.shape):
            raise ValueError(
                f"steering vector of shape {list(self.vector.shape)} does not fit {hook.name!r}, whose "
                f"activation is {list(x.shape)} ([batch, pos, ...])"
            )
        delta = self._delta(x)
        if self.all:
            return x + delta
        mask = self._mask(x, hook)  # [batch, pos]
        return x + mask.view(*mask.shape, *([1] * self.vector.ndim)).to(x.dtype) * delta

    def _delta(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.dtype, x.device)
        if key not in self._cast:
            self._cast[key] = (self.vector.to(x.device, torch.float32) * self.scale).to(x.dtype)
        return self._cast[key]

    def _mask(self, x: torch.Tensor, hook: Any) -> torch.Tensor:
        state = getattr(hook, "generation", None)
        if state is None:
            if self.new:
                raise ValueError(
                    "positions='new' steers generated tokens, so it acts only inside generate; in a plain "
                    "forward pass use 'all' or position indices"
                )
            mask = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
            for index in self.indices:
                if not -x.shape[1] <= index < x.shape[1]:
                    raise ValueError(
                        f"steering position {index} is outside this input of {x.shape[1]} positions"
                    )
                mask[:, index] = True
            return mask
        if self.indices and state.step == 0:  # the prompt pass: every index must fall in every prompt
            shortest = int(state.prompt_lengths.min())
            outside = [i for i in self.indices if not -shortest <= i < shortest]
            if outside:
                raise ValueError(
                    f"steering position {outside[0]} is outside the prompt: the shortest prompt has {shortest} "
                    f"tokens, so give positions from {-shortest} to {shortest - 1}, or 'new' for generated tokens"
                )
        mask = state.position_mask(self.indices) if self.indices else torch.zeros_like(state.mask)
        return mask | state.generated if self.new else mask


def _parse_positions(positions: Positions) -> tuple[bool, bool, list[int]]:
    """``(all, new, indices)`` from ``"all"``, ``"new"``, an index, or a list of indices and ``"new"``."""
    if isinstance(positions, str):
        positions = [positions]
    elif isinstance(positions, int) and not isinstance(positions, bool):
        positions = [positions]
    items = list(positions)
    if items == ["all"]:
        return True, False, []
    bad = [p for p in items if not (p == "new" or (isinstance(p, int) and not isinstance(p, bool)))]
    if bad or not items:
        raise ValueError(
            f"positions={positions!r}; give 'all', 'new' (generated tokens), position indices (negative "
            "count back from the end of the prompt), or a list of indices and 'new'"
        )
    return False, "new" in items, [p for p in items if p != "new"]


def steer(vector: SteeringVector | torch.Tensor, scale: float = 1.0, positions: Positions = "all") -> Steer:
    """A hook adding ``scale * vector`` to an activation.

    Args:
        vector: a :class:`SteeringVector` (checked against the model before a generation runs) or a tensor of
            the activation's shape after ``[batch, pos]``.
        scale: the multiple to add (negative steers the other way).
        positions: ``"all"``; ``"new"``, the generated tokens only (inside ``generate``); indices, which
            inside ``generate`` count each row's real tokens (negative: back from the end of its prompt, so
            ``-1`` is the last prompt token) and in a plain forward index the position axis; or a list mixing
            indices and ``"new"`` (``[-1, "new"]``: every position a new token is predicted from).

    Example:
        >>> fwd_hooks = [("blocks.6.hook_resid_pre", steer(vec, 4.0, positions="new"))]  # doctest: +SKIP
    """
    if isinstance(vector, SteeringVector):
        return Steer(vector.vector, scale, positions, vector.model)
    if not isinstance(vector, torch.Tensor) or not vector.is_floating_point():
        raise TypeError(f"steer needs a SteeringVector or a float tensor, got {type(vector).__name__}")
    return Steer(vector, scale, positions, None)


def steering_vector(
    model: Any,
    positive: str | Sequence[str],
    negative: str | Sequence[str],
    hook_name: str,
    position: str | int = "last",
    *,
    batch_size: int = 16,
    prepend_bos: bool | None = None,
) -> SteeringVector:
    """The mean difference ``positive - negative`` of ``hook_name``'s activation over paired prompts.

    Args:
        model: a :class:`~interp.HookedTransformer` with a tokenizer.
        positive, negative: prompts, paired by index (the same number of each).
        hook_name: one hook with a position axis (``blocks.6.hook_resid_pre``, ``blocks.6.attn.hook_z``...).
        position: where to read each prompt: ``"last"`` (its last token), ``"mean"`` (the mean over its
            tokens) or an index (negative from the end).
        batch_size: prompts per forward pass.
        prepend_bos: as in ``model.to_tokens``.
    """
    names = model.resolve(hook_name)
    if len(names) != 1 or names[0] != hook_name:
        raise ValueError(f"hook_name={hook_name!r} must name one hook; for several use steering_vectors")
    return steering_vectors(
        model, positive, negative, [hook_name], position, batch_size=batch_size, prepend_bos=prepend_bos
    )[hook_name]


def steering_vectors(
    model: Any,
    positive: str | Sequence[str],
    negative: str | Sequence[str],
    names_filter: Any,
    position: str | int = "last",
    *,
    batch_size: int = 16,
    prepend_bos: bool | None = None,
) -> dict[str, SteeringVector]:
    """:func:`steering_vector` at every hook ``names_filter`` selects (one pass over the prompts for all)."""
    positive, negative = _texts(positive, "positive"), _texts(negative, "negative")
    if len(positive) != len(negative):
        raise ValueError(
            f"{len(positive)} positive and {len(negative)} negative prompts; a steering vector averages "
            "differences over pairs, so give the same number of each"
        )
    _check_position(position)
    names = model.resolve(names_filter)
    for name in names:
        activation_shape(model.cfg, name)  # refuses scores and patterns
    pos = read_activations(model, positive, names, position, batch_size, prepend_bos)
    neg = read_activations(model, negative, names, position, batch_size, prepend_bos)
    identity = model_identity(model)
    return {
        name: SteeringVector(
            vector=(pos[name] - neg[name]).mean(dim=0),
            hook_name=name,
            model=identity,
            position=position,
            n_pairs=len(positive),
        )
        for name in names
    }


@torch.no_grad()
def read_activations(
    model: Any,
    prompts: Sequence[str],
    names: list[str],
    position: str | int,
    batch_size: int = 16,
    prepend_bos: bool | None = None,
) -> dict[str, torch.Tensor]:
    """Each hook's activation at ``position`` of each prompt, float32 ``[prompt, ...]`` on the CPU."""
    _check_position(position)
    stop = _stop_layer(model, names)
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    for start in range(0, len(prompts), batch_size):
        chunk = list(prompts[start : start + batch_size])
        ids, mask = model.to_tokens(chunk, prepend_bos=prepend_bos, padding_side="right")
        lengths = mask.sum(dim=-1)  # [batch]
        _, cache = model.run_with_cache(ids, mask, names_filter=names, stop_at_layer=stop)
        for name in names:
            parts[name].append(
                _at_position(cache[name].float(), mask.bool(), lengths, position, start, chunk)
            )
    return {name: torch.cat(p).cpu() for name, p in parts.items()}


def _at_position(
    act: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor, position: str | int, start: int, chunk
) -> torch.Tensor:
    """``act [batch, pos, ...]`` at each row's position (right-padded rows) -> ``[batch, ...]``."""
    rows = torch.arange(act.shape[0], device=act.device)
    if position == "last":
        return act[rows, lengths - 1]
    if position == "mean":
        weights = mask.to(act.dtype).view(*mask.shape, *([1] * (act.ndim - 2)))
        return (act * weights).sum(dim=1) / weights.sum(dim=1)
    index = lengths + position if position < 0 else torch.full_like(lengths, position)
    bad = ((index < 0) | (index >= lengths)).nonzero().flatten().tolist()
    if bad:
        row = bad[0]
        raise ValueError(
            f"position {position} is outside prompt {start + row} ({int(lengths[row])} tokens): "
            f"{chunk[row]!r}"
        )
    return act[rows, index]


def _stop_layer(model: Any, names: list[str]) -> int | None:
    """The earliest ``stop_at_layer`` by which every named hook has run, or ``None`` for a full pass."""
    needed = 0
    for name in names:
        layer = layer_of(name)
        if layer is None and name not in ("hook_embed", "hook_pos_embed"):
            return None
        needed = max(needed, 0 if layer is None else layer + 1)
    return needed


def _texts(prompts: str | Sequence[str], what: str) -> list[str]:
    texts = [prompts] if isinstance(prompts, str) else list(prompts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"{what} prompts must be a string or a non-empty list of strings")
    return texts


def _check_position(position: str | int) -> None:
    if position in ("last", "mean") or (isinstance(position, int) and not isinstance(position, bool)):
        return
    raise ValueError(f"position={position!r}; expected 'last', 'mean' or a token index")


__all__ = [
    "Steer",
    "SteeringVector",
    "activation_shape",
    "load_steering_vector",
    "model_identity",
    "read_activations",
    "steer",
    "steering_vector",
    "steering_vectors",
]
