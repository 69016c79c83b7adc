"""Starting a training run (the initial dictionary) and saving and resuming it exactly.

Initialisation, as in SAELens and sparsify: decoder rows are random unit vectors and the encoder their
transpose; ``b_dec`` is the geometric median (Weiszfeld's algorithm) or the mean of a sample of rows; inputs are
scaled by ``sqrt(d_in) / mean norm`` (SAELens's ``expected_average_only_in``), a factor folded into the weights
when training ends.

A checkpoint is one safetensors file holding every tensor the run needs (parameters, Adam's moments and step
counts, each latent's tokens since it last fired) and a JSON header with the step, the settings and the
history. It is written to a temporary name and renamed, so an interrupted write never replaces the last good
checkpoint, and a resumed run continues bit for bit as the uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from interp.store.files import write_safetensors

CHECKPOINT = "checkpoint.safetensors"


def geometric_median(points: torch.Tensor, iterations: int = 100, eps: float = 1e-8) -> torch.Tensor:
    """The point minimising the sum of Euclidean distances to ``points [n, d]`` (Weiszfeld's iterations)."""
    median = points.mean(0)
    for _ in range(iterations):
        distances = (points - median).norm(dim=-1).clamp(min=eps)
        weights = 1.0 / distances
        new = (weights[:, None] * points).sum(0) / weights.sum()
        if (new - median).norm() <= eps * max(1.0, float(median.norm())):
            return new
        median = new
    return median


def initial_weights(d_in: int, d_sae: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W_enc [d_in, d_sae], W_dec [d_sae, d_in])``: random unit decoder rows, encoder the transpose."""
    generator = torch.Generator().manual_seed(seed)
    w_dec = torch.randn(d_sae, d_in, generator=generator)
    w_dec /= w_dec.norm(dim=-1, keepdim=True)
    return w_dec.T.clone().contiguous(), w_dec


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor], header: dict[str, Any]) -> None:
    """Write one checkpoint atomically (see the module docstring)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"header": json.dumps(header, sort_keys=True, default=str)}
    write_safetensors(path, {k: v.detach().cpu().contiguous() for k, v in tensors.items()}, meta)


def load_checkpoint(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
    """``(tensors, header)`` of a checkpoint, or ``None`` when there is none.

    Raises:
        ValueError: The file is there but cannot be read (truncated, or not a checkpoint); the message names it.
    """
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            header = json.loads(f.metadata()["header"])
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has no __iter__
    except Exception as err:  # safetensors' own error, a JSON error or a missing key: the file is damaged
        raise ValueError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {err}); it is damaged, perhaps cut "
            "short by a crash: delete it to train again from the start"
        ) from None
    return tensors, header


@dataclasses.dataclass
class TrainState:
    """Where a run is: what a checkpoint holds besides the parameters and Adam's state.

    Attributes:
        step: optimisation steps done.
        scale: the factor inputs are multiplied by (folded into the weights at the end).
        variance: the variance of a sample of scaled inputs (the denominator of the FVU).
        since_fired: ``[d_sae]`` tokens since each latent last fired (int64).
        batch_threshold: BatchTopK's running threshold (a float64 scalar tensor).
        history: one record per ``log_every`` steps (step, fvu, l0, dead fraction).
    """

    step: int
    scale: float
    variance: float
    since_fired: torch.Tensor
    batch_threshold: torch.Tensor
    history: list[dict[str, float]]

    def header(self) -> dict[str, Any]:
        """The JSON part of a checkpoint."""
        return {"step": self.step, "scale": self.scale, "variance": self.variance, "history": self.history}

    def tensors(self) -> dict[str, torch.Tensor]:
        """The tensor part of a checkpoint."""
        return {"since_fired": self.since_fired, "batch_threshold": self.batch_threshold}

    @classmethod
    def restored(cls, header: dict[str, Any], tensors: dict[str, torch.Tensor]) -> TrainState:
        """The state a checkpoint recorded."""
        return cls(
            step=header["step"],
            scale=header["scale"],
            variance=header["variance"],
            since_fired=tensors["since_fired"].clone(),
            batch_threshold=tensors["batch_threshold"].clone(),
            history=header["history"],
        )


def optimizer_tensors(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter]) -> dict[str, Any]:
    """Adam's state for ``params`` as flat tensors (``adam.{i}.exp_avg`` and so on)."""
    out = {}
    for i, p in enumerate(params):
        for key, value in optimizer.state.get(p, {}).items():
            out[f"adam.{i}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    return out


def restore_optimizer(
    optimizer: torch.optim.Optimizer, params: list, tensors: dict[str, torch.Tensor]
) -> None:
    for i, p in enumerate(params):
        state = {  # (a JumpReLU SAE's log-thresholds were [d_sae] before [1, d_sae])
            key.split(".", 2)[2]: value.to(p.device).reshape(p.shape)
            if key.endswith(("exp_avg", "exp_avg_sq"))
            else value
            for key, value in tensors.items()
            if key.startswith(f"adam.{i}.")
        }
        if state:
            optimizer.state[p] = state


def identity(settings: Any, d_in: int, fingerprint: str) -> dict[str, Any]:
    """What must match for a checkpoint to be resumed: settings, width and data."""
    fields = dataclasses.asdict(settings)
    for volatile in ("checkpoint_every", "progress", "log_every", "device"):
        fields.pop(volatile, None)
    return {"settings": fields, "d_in": d_in, "data": fingerprint}


def describe_mismatch(stored: dict[str, Any], wanted: dict[str, Any]) -> str:
    diffs = []
    for key in ("d_in", "data"):
        if stored.get(key) != wanted.get(key):
            diffs.append(f"{key} was {stored.get(key)!r}, now {wanted.get(key)!r}")
    a, b = stored.get("settings", {}), wanted.get("settings", {})
    diffs += [
        f"{k} was {a.get(k)!r}, now {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)
    ]
    return "; ".join(diffs[:6])
