"""``interp.sae.train``: fit a sparse autoencoder to activations, in bounded memory, resumably, on N ranks.

The recipe is the one SAELens and sparsify use: decoder rows kept at unit norm (the gradient along each row
removed before the step, rows renormalised after), ``b_dec`` started at the data's geometric median, inputs
scaled to mean norm ``sqrt(d_in)`` and the scale folded into the weights at the end, Adam with a linear warm-up
and a linear decay over the last fifth of the steps, and an architecture's sparsity term (see
:mod:`interp.sae.training.step`). The default learning rate is sparsify's, ``2e-4 / sqrt(d_sae / 2**14)``.

Rows stream from the source through a shuffling buffer (:mod:`interp.sae.training.data`), so a store much larger
than memory trains in ``buffer_rows`` rows of memory. With ``checkpoint_dir`` the run saves every
``checkpoint_every`` steps and at the end, and a call with the same arguments resumes from the last checkpoint:
the result equals, bit for bit on a CPU, what the uninterrupted run gives. Under ``torchrun`` the model is
wrapped in DistributedDataParallel and each rank trains on its share of every batch: two ranks give the SAE one
process gives for the same total batch (to float rounding of the gradient average).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from tqdm import tqdm

from interp import distributed
from interp.sae.config import ARCHITECTURES, SAEConfig
from interp.sae.module import SAE
from interp.sae.training.data import RowSource, Stream
from interp.sae.training.state import (
    CHECKPOINT,
    TrainState,
    describe_mismatch,
    geometric_median,
    identity,
    initial_weights,
    load_checkpoint,
    optimizer_tensors,
    restore_optimizer,
    save_checkpoint,
)
from interp.sae.training.step import TrainingStep


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """Every setting of a training run (recorded in checkpoints and in the SAE's metadata)."""

    d_sae: int
    architecture: Literal["topk", "batchtopk", "standard", "jumprelu"] = "topk"
    k: int | None = None
    lr: float | None = None
    tokens: int | None = None
    batch_size: int = 4096
    seed: int = 0
    b_dec_init: Literal["geometric_median", "mean", "zeros"] = "geometric_median"
    normalize: bool = True
    aux_coefficient: float = 1 / 32
    l1_coefficient: float = 3e-3
    l0_coefficient: float = 2e-3
    jumprelu_init_threshold: float = 0.01
    jumprelu_bandwidth: float = 0.05
    batchtopk_threshold_lr: float = 0.01
    dead_after_tokens: int | None = None
    warmup_steps: int | None = None
    decay_fraction: float = 0.2
    buffer_rows: int = 262144
    init_rows: int = 16384
    min_position: int = 0
    checkpoint_every: int | None = None
    log_every: int = 25

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture={self.architecture!r}; expected one of {list(ARCHITECTURES)}")
        if self.architecture in ("topk", "batchtopk"):
            if self.k is None or self.k < 1:
                raise ValueError(f"architecture={self.architecture!r} needs k >= 1, got k={self.k!r}")
            if self.k > self.d_sae:
                raise ValueError(f"k={self.k} is larger than d_sae={self.d_sae}; pick k <= d_sae")
        for name in ("d_sae", "batch_size", "buffer_rows", "init_rows", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; it must be at least 1")
        if self.tokens is not None and self.tokens < 1:
            raise ValueError(f"tokens={self.tokens}; train on at least one token")
        if self.checkpoint_every is not None and self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every={self.checkpoint_every}; give a positive number of steps")
        if not 0 <= self.decay_fraction < 1:
            raise ValueError(f"decay_fraction={self.decay_fraction}; it must lie in [0, 1)")

    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else 2e-4 / math.sqrt(self.d_sae / 2**14)


def train(
    source: Any,
    *,
    hook_name: str | None = None,
    d_sae: int,
    architecture: str = "topk",
    k: int | None = None,
    lr: float | None = None,
    tokens: int | None = None,
    batch_size: int = 4096,
    seed: int = 0,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    progress: bool = True,
    **options: Any,
) -> SAE:
    """Train an SAE on ``source`` and return it (the scale folded in, ready to splice).

    Args:
        source: a float tensor ``[n, d_in]`` or an :class:`~interp.store.ActivationStore`.
        hook_name: the store's hook to train on (default: its only one); recorded in the SAE's config.
        d_sae: number of latents.
        architecture: ``topk``, ``batchtopk``, ``standard`` (ReLU + L1) or ``jumprelu``.
        k: active latents per token (TopK, BatchTopK).
        lr: Adam's learning rate (default ``2e-4 / sqrt(d_sae / 2**14)``).
        tokens: rows to train on (default: one pass over the source); the last batch may wrap around.
        batch_size: rows per step, over all ranks together.
        seed: decides the initial dictionary and the order of rows; the same seed gives the same SAE.
        checkpoint_dir: where to save checkpoints and resume from.
        checkpoint_every: steps between checkpoints (default: only at the end).
        progress: show a progress bar (rank 0).
        **options: further :class:`TrainSettings` fields (``aux_coefficient``, ``buffer_rows``,
            ``min_position`` to train a store's rows from that position of each item on, ...).

    Returns:
        The SAE, with ``sae.cfg.metadata["training"]`` holding the settings and the loss history.
    """
    settings = TrainSettings(
        d_sae=d_sae,
        architecture=architecture,
        k=k,
        lr=lr,
        tokens=tokens,
        batch_size=batch_size,
        seed=seed,
        checkpoint_every=checkpoint_every,
        **options,
    )
    rows = RowSource(source, hook_name, min_position=settings.min_position)
    run = Run(
        settings, rows, Path(checkpoint_dir) if checkpoint_dir is not None else None, SAEJob(settings, rows)
    )
    return run.execute(progress and distributed.rank() == 0)


class SAEJob:
    """What is particular to training an SAE: the initial dictionary, the step, and the finished SAE."""

    def __init__(self, settings: TrainSettings, rows: RowSource) -> None:
        self.s, self.rows = settings, rows

    def n_features(self) -> int:
        return self.s.d_sae

    def start(self, sample: torch.Tensor) -> tuple[TrainingStep, float, float]:
        """``(step, scale, variance)`` from a sample of rows."""
        s, d_in = self.s, self.rows.d_in
        scale = math.sqrt(d_in) / float(sample.norm(dim=-1).mean().clamp(min=1e-12)) if s.normalize else 1.0
        sample = sample * scale
        variance = float((sample - sample.mean(0)).pow(2).sum(-1).mean().clamp(min=1e-12))
        cfg = SAEConfig(
            d_in=d_in,
            d_sae=s.d_sae,
            architecture=s.architecture,
            k=s.k,
            hook_name=self.rows.hook_name,
            model_name=self.rows.model_name,
        )
        sae = SAE(cfg)
        w_enc, w_dec = initial_weights(d_in, s.d_sae, s.seed)
        with torch.no_grad():
            sae.W_enc.copy_(w_enc)
            sae.W_dec.copy_(w_dec)
            if s.b_dec_init == "geometric_median":
                sae.b_dec.copy_(geometric_median(sample))
            elif s.b_dec_init == "mean":
                sae.b_dec.copy_(sample.mean(0))
        if cfg.has_threshold:
            sae.threshold.requires_grad_(False)
        return TrainingStep(sae, s, variance), scale, variance

    def finish(self, step_module: TrainingStep, state: TrainState, record: dict[str, Any]) -> SAE:
        sae = step_module.sae
        with torch.no_grad():
            if sae.cfg.architecture == "jumprelu":
                sae.threshold.copy_(step_module.log_threshold.exp())
            elif sae.cfg.architecture == "batchtopk":
                sae.threshold.fill_(float(state.batch_threshold))
        if sae.cfg.has_threshold:
            sae.threshold.requires_grad_(True)
        sae.fold_activation_scale(state.scale)
        sae.cfg.metadata["training"] = record
        return sae


class Run:
    """The training loop shared by every kind of dictionary: streaming, schedule, checkpoints, DDP.

    Args:
        settings: the run's settings.
        rows: the training rows.
        folder: where checkpoints go (``None``: none).
        job: what the kind provides: ``n_features()``, ``start(sample) -> (step, scale, variance)`` and
            ``finish(step, state, record)`` (and, where the scale is not one number, ``batch_scale(scale)``,
            the factor a batch is multiplied by); the step module returns ``loss``, ``fired [n_features]``,
            ``fvu`` and ``l0`` for a batch.
        label: extra identity a checkpoint must match (a transcoder's kind, layers and hooks).
    """

    def __init__(
        self, settings: Any, rows: RowSource, folder: Path | None, job: Any, label: str = ""
    ) -> None:
        self.s, self.rows, self.folder, self.job = settings, rows, folder, job
        self.total_tokens = settings.tokens or rows.n_rows
        self.steps = -(-self.total_tokens // settings.batch_size)
        self.stream = Stream(rows, settings.seed, settings.buffer_rows)
        self.identity = identity(settings, rows.d_in, rows.fingerprint() + label)

    def _sample(self) -> torch.Tensor:
        block = next(self.stream.rows_from(0))
        return block[: self.s.init_rows]

    def _start(self) -> tuple[Any, torch.optim.Optimizer, TrainState]:
        s = self.s
        step_module, scale, variance = self.job.start(self._sample())
        params = step_module.trained_parameters()
        optimizer = torch.optim.Adam(params, lr=s.learning_rate())
        state = TrainState(
            step=0,
            scale=scale,
            variance=variance,
            since_fired=torch.zeros(self.job.n_features(), dtype=torch.int64),
            batch_threshold=torch.zeros((), dtype=torch.float64),
            history=[],
        )
        loaded = load_checkpoint(self.folder / CHECKPOINT) if self.folder is not None else None
        if loaded is not None:
            state = self._resume(loaded, step_module, optimizer, params)
        return step_module, optimizer, state

    def _resume(self, loaded, step_module: Any, optimizer, params) -> TrainState:
        tensors, header = loaded
        if header["identity"] != self.identity:
            why = describe_mismatch(header["identity"], self.identity)
            raise ValueError(
                f"{self.folder / CHECKPOINT} belongs to another run ({why}); "
                "pass the same settings and data to resume, or another checkpoint_dir to start over"
            )
        with torch.no_grad():
            for i, p in enumerate(params):
                p.copy_(tensors[f"param.{i}"])
        restore_optimizer(optimizer, params, tensors)
        step_module.variance = header["variance"]
        return TrainState.restored(header, tensors)

    def _save(self, params, optimizer, state: TrainState) -> None:
        if self.folder is None:
            return
        if distributed.rank() == 0:
            tensors = {f"param.{i}": p for i, p in enumerate(params)}
            tensors.update(optimizer_tensors(optimizer, params))
            tensors.update(state.tensors())
            save_checkpoint(self.folder / CHECKPOINT, tensors, {"identity": self.identity, **state.header()})
        distributed.barrier()

    def _lr(self, step: int) -> float:
        s, base = self.s, self.s.learning_rate()
        warmup = s.warmup_steps if s.warmup_steps is not None else min(1000, self.steps // 20)
        decay_start = int(self.steps * (1 - s.decay_fraction))
        factor = 1.0
        if warmup and step < warmup:
            factor = (step + 1) / warmup
        if s.decay_fraction and step >= decay_start:
            factor = min(factor, (self.steps - step) / max(1, self.steps - decay_start))
        return base * factor

    def execute(self, progress: bool) -> SAE:
        s = self.s
        step_module, optimizer, state = self._start()
        params = step_module.trained_parameters()
        wrapped: Any = step_module
        if distributed.is_distributed():
            wrapped = torch.nn.parallel.DistributedDataParallel(step_module)
        dead_after = s.dead_after_tokens or max(s.batch_size, min(10_000_000, self.total_tokens // 4))
        scale = self.job.batch_scale(state.scale) if hasattr(self.job, "batch_scale") else state.scale
        bar = tqdm(total=self.steps, initial=state.step, disable=not progress, unit="step", desc="train sae")
        batches = self.stream.batches(s.batch_size, state.step) if state.step < self.steps else iter(())
        with bar:
            for batch in batches:
                step = state.step
                for group in optimizer.param_groups:
                    group["lr"] = self._lr(step)
                dead = state.since_fired >= dead_after
                out = wrapped(batch * scale, dead, s.batch_size)
                optimizer.zero_grad(set_to_none=True)
                out["loss"].backward()
                step_module.project_decoder_gradient()
                optimizer.step()
                step_module.normalise_decoder()
                self._track(out, state, s)
                state.step = step + 1
                if (step + 1) % s.log_every == 0 or step + 1 == self.steps:
                    record = self._record(out, state, dead_after)
                    state.history.append(record)
                    bar.set_postfix(fvu=f"{record['fvu']:.3f}", l0=f"{record['l0']:.1f}")
                bar.update()
                at_end = state.step == self.steps
                if at_end or (s.checkpoint_every and state.step % s.checkpoint_every == 0):
                    self._save(params, optimizer, state)
                if at_end:
                    break
        return self._finish(step_module, state)

    def _track(self, out: dict, state: TrainState, s: TrainSettings) -> None:
        fired = out["fired"].to(torch.float32)
        if distributed.is_distributed():
            dist.all_reduce(fired)
        state.since_fired += s.batch_size
        state.since_fired[fired > 0] = 0
        if "batch_threshold" in out:
            lr = s.batchtopk_threshold_lr
            state.batch_threshold = (1 - lr) * state.batch_threshold + lr * out["batch_threshold"].double()

    def _record(self, out: dict, state: TrainState, dead_after: int) -> dict[str, float]:
        totals = torch.stack([out["fvu"].float(), out["l0"].float()])
        if distributed.is_distributed():
            dist.all_reduce(totals)
        world = distributed.world_size()
        return {
            "step": state.step,
            "fvu": round(float(totals[0]) / world, 6),
            "l0": round(float(totals[1]) / self.s.batch_size, 4),
            "dead_fraction": round(float((state.since_fired >= dead_after).float().mean()), 6),
        }

    def _finish(self, step_module: Any, state: TrainState) -> Any:
        record = {
            "settings": asdict(self.s),
            "steps": self.steps,
            "tokens": self.steps * self.s.batch_size,
            "input_scale": state.scale,
            "history": state.history,
            "data": self.identity["data"],
        }
        return self.job.finish(step_module, state, record)
