"""Steering by a direction other than by adding it: rescaling the activation's component along it, or capping it.

:func:`~interp.analysis.steering.steer` adds ``scale * vector``. Two other edits act on the component of the
activation along the vector's direction ``u = vector / |vector|``, leaving the rest as it is:

- :func:`project`: ``h -> (h - (h.u) u) + scale * (h.u) u``, the component along ``u`` multiplied by ``scale``
  (``0`` removes it, ``-1`` reflects it); Neuronpedia's ``ORTHOGONAL_DECOMP``.
- :func:`cap`: ``h -> h - max(0, h.u - scale) u``, the component along ``u`` held at most ``scale``;
  Neuronpedia's ``PROJECTION_CAP`` (a maximum and no minimum).

On ``hook_z`` (a vector ``[head, d_head]``) the direction spans every head at once. Both take the positions
:func:`~interp.analysis.steering.steer` takes and act in generation the same way.
"""

from __future__ import annotations

from typing import Any

import torch

from interp.analysis.steering import Positions, Steer, SteeringVector


class _AlongDirection(Steer):
    """A steering hook whose change depends on the activation's component along the vector's direction."""

    def __init__(self, vector: torch.Tensor, scale: float, positions: Positions, identity: dict | None):
        if not bool((vector != 0).any()):
            raise ValueError("the steering vector is all zeros; it has no direction to act along")
        super().__init__(vector, scale, positions, identity)

    def _unit(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.device,)
        if key not in self._cast:
            v = self.vector.to(x.device, torch.float32)
            self._cast[key] = v / v.norm()
        return self._cast[key]

    def _along(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        u = self._unit(x)
        dims = tuple(range(-u.ndim, 0))
        return (x.float() * u).sum(dims, keepdim=True), u  # [batch, pos, 1...]: h.u


class Project(_AlongDirection):
    """The component along the direction multiplied by ``scale``: build it with :func:`project`."""

    def _delta(self, x: torch.Tensor) -> torch.Tensor:
        along, u = self._along(x)
        return ((self.scale - 1.0) * along * u).to(x.dtype)


class Cap(_AlongDirection):
    """The component along the direction held at most ``scale``: build it with :func:`cap`."""

    def _delta(self, x: torch.Tensor) -> torch.Tensor:
        along, u = self._along(x)
        return (-(along - self.scale).clamp_min(0.0) * u).to(x.dtype)


def _parts(vector: SteeringVector | torch.Tensor) -> tuple[torch.Tensor, dict[str, Any] | None]:
    if isinstance(vector, SteeringVector):
        return vector.vector, vector.model
    if not isinstance(vector, torch.Tensor) or not vector.is_floating_point():
        raise TypeError(f"expected a SteeringVector or a float tensor, got {type(vector).__name__}")
    return vector, None


def project(vector: SteeringVector | torch.Tensor, scale: float, positions: Positions = "all") -> Project:
    """A hook multiplying the activation's component along ``vector``'s direction by ``scale``.

    Example:
        >>> fwd_hooks = [("blocks.6.hook_resid_pre", project(vec, 0.0))]  # doctest: +SKIP
    """
    tensor, identity = _parts(vector)
    return Project(tensor, scale, positions, identity)


def cap(vector: SteeringVector | torch.Tensor, maximum: float, positions: Positions = "all") -> Cap:
    """A hook holding the activation's component along ``vector``'s direction at most ``maximum``."""
    tensor, identity = _parts(vector)
    return Cap(tensor, maximum, positions, identity)
