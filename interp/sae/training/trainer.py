"""``interp.sae.train``: fit a dictionary of any kind (an SAE, a transcoder set, a cross-layer transcoder) to a
model's activations, in bounded memory, resumably, on N ranks: one loop, one step, one checkpoint format.

The recipe is the one SAELens and sparsify use: decoder rows kept at unit norm (the gradient along each row
removed before the step, rows renormalised after), ``b_dec`` started at the data's geometric median (an SAE)
or mean (transcoders), inputs scaled to mean norm ``sqrt(d)`` and the scale folded into the weights at the end,
Adam with a linear warm-up and a linear decay over the last fifth of the steps, and an architecture's sparsity
term (see :mod:`interp.sae.training.step`). The default learning rate is sparsify's, ``2e-4 / sqrt(d_sae /
2**14)``. What differs between the kinds (the rows, the initial dictionary, the finished one) is in
:mod:`interp.sae.training.kinds`.

Rows stream from the source through a shuffling buffer (:mod:`interp.sae.training.data`), so a store much larger
than memory trains in ``buffer_rows`` rows of memory. With ``checkpoint_dir`` the run saves every
``checkpoint_every`` steps and at the end, and a call with the same arguments resumes from the last checkpoint:
the result equals, bit for bit on a CPU, what the uninterrupted run gives. Under ``torchrun`` the model is
wrapped in DistributedDataParallel and each rank trains on its share of every batch: two ranks give the SAE one
process gives for the same total batch (to float rounding of the gradient average).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from interp import distributed
from interp.sae.training.data import RowSource, Stream
from interp.sae.training.kinds import KINDS, job_for
from interp.sae.training.settings import TrainSettings
from interp.sae.training.state import (
    CHECKPOINT,
    TrainState,
    describe_mismatch,
    identity,
    load_checkpoint,
    optimizer_tensors,
    restore_optimizer,
    save_checkpoint,
)


def train(
    source: Any,
    *,
    d_sae: int,
    kind: str = "sae",
    hook_name: str | None = None,
    layers: list[int] | None = None,
    input_site: str | None = None,
    output_site: str | None = None,
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
) -> Any:
    """Train a dictionary of any kind on ``source`` and return it (scales folded in, ready to splice).

    Args:
        source: for an SAE, a float tensor ``[n, d_in]`` or an :class:`~interp.store.ActivationStore`; for
            transcoders, a store holding ``blocks.L.{input_site}`` and ``blocks.L.{output_site}`` for every layer
            trained, or a pair ``(inputs, outputs)`` of tensors ``[rows, n_layers, d_model]``.
        d_sae: features (per layer, for transcoders).
        kind: ``sae``; ``transcoder`` (per layer), ``skip-transcoder`` (per layer with a linear skip) or ``clt``.
        hook_name: an SAE's hook in the store (default: its only one); recorded in the SAE's config.
        layers: the transcoder layers to train (default: every layer the store holds; a CLT's must be
            ``0..n-1``).
        input_site, output_site: the hooks inside a block transcoders read and write (default
            ``ln2.hook_normalized`` and ``hook_mlp_out``).
        architecture: ``topk``, ``batchtopk``, ``standard`` (ReLU + L1) or ``jumprelu``.
        k: active features per token (TopK, BatchTopK).
        lr: Adam's learning rate (default ``2e-4 / sqrt(d_sae / 2**14)``).
        tokens: rows to train on (default: one pass over the source); the last batch may wrap around.
        batch_size: rows per step, over all ranks together.
        seed: decides the initial dictionary and the order of rows; the same seed gives the same dictionary.
        checkpoint_dir: where to save checkpoints and resume from.
        checkpoint_every: steps between checkpoints (default: only at the end).
        progress: show a progress bar (rank 0).
        **options: further :class:`TrainSettings` fields (``aux_coefficient``, ``buffer_rows``,
            ``min_position`` to train a store's rows from that position of each item on, ...).

    Returns:
        An :class:`~interp.sae.SAE` (``sae.cfg.metadata["training"]``), or a :class:`~interp.sae.TranscoderSet`
        or :class:`~interp.sae.CrossLayerTranscoder` (``tc.metadata["training"]``): the settings and the loss
        history. A :class:`TrainingWarning` says when the last fraction of variance unexplained is 1 or more.

    Raises:
        SettingError: a setting no run can use (it names the setting). ValueError: an unknown kind, arguments
        of another kind, or data that does not fit it; all before training starts.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; expected one of {list(KINDS)}")
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
    sites = dict(layers=layers, input_site=input_site, output_site=output_site)
    job, rows, label = job_for(kind, settings, source, hook_name=hook_name, **sites)
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    return Run(settings, rows, folder, job, label).execute(progress and distributed.rank() == 0)


def train_transcoders(
    source: Any,
    *,
    kind: str = "transcoder",
    d_transcoder: int,
    layers: list[int] | None = None,
    input_site: str = "ln2.hook_normalized",
    output_site: str = "hook_mlp_out",
    **settings: Any,
) -> Any:
    """:func:`train` of transcoders: the name earlier versions gave it, with ``d_transcoder`` for ``d_sae``.

    .. deprecated:: use :func:`train` with ``kind=`` (``transcoder``, ``skip-transcoder`` or ``clt``).
    """
    if kind not in KINDS[1:]:
        raise ValueError(f"kind={kind!r}; expected one of {list(KINDS[1:])}")
    warnings.warn(
        "interp.sae.train_transcoders is interp.sae.train now (one trainer for every dictionary): call "
        f"train(source, kind={kind!r}, d_sae={d_transcoder}, ...)",
        DeprecationWarning,
        stacklevel=2,
    )
    sites = dict(layers=layers, input_site=input_site, output_site=output_site)
    return train(source, kind=kind, d_sae=d_transcoder, **sites, **settings)


class TrainingWarning(UserWarning):
    """A run finished with a dictionary that reconstructs worse than predicting the mean."""


def fit_warning(record: dict[str, Any]) -> str | None:
    """What to say when a finished run's last fraction of variance unexplained is 1 or more (the dictionary
    does worse than predicting every row's mean), with what to try; ``None`` otherwise."""
    last = record["history"][-1] if record["history"] else None
    if last is None or not last["fvu"] >= 1:
        return None
    s = record["settings"]
    advice = (
        f"it took {record['steps']} steps of {s['batch_size']:,} rows: train on more tokens (tokens=, "
        "--tokens) or in smaller batches (batch_size=, --train-batch-size), so that it takes a few thousand steps"
        if record["steps"] < 1000
        else "lower the learning rate (lr=, --lr), or raise k or d_sae"
    )
    return (
        f"the dictionary's fraction of variance unexplained is {last['fvu']:.3f} at the end of training, worse "
        f"than predicting the mean of the rows (1.0): {advice}"
    )


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
            for i, p in enumerate(params):  # (a JumpReLU SAE's log-thresholds were [d_sae] before [1, d_sae])
                p.copy_(tensors[f"param.{i}"].reshape(p.shape))
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

    def execute(self, progress: bool) -> Any:
        s = self.s
        step_module, optimizer, state = self._start()
        params = step_module.trained_parameters()
        wrapped: Any = step_module
        if distributed.is_distributed():
            wrapped = torch.nn.parallel.DistributedDataParallel(step_module)
        dead_after = s.dead_after_tokens or max(s.batch_size, min(10_000_000, self.total_tokens // 4))
        scale = self.job.batch_scale(state.scale) if hasattr(self.job, "batch_scale") else state.scale
        desc = getattr(self.job, "desc", "train")
        bar = tqdm(total=self.steps, initial=state.step, disable=not progress, unit="step", desc=desc)
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

    def _track(self, out: dict, state: TrainState, s: Any) -> None:
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
        warning = fit_warning(record)
        if warning is not None:
            warnings.warn(warning, TrainingWarning, stacklevel=4)
        return self.job.finish(step_module, state, record)
