"""A whole training run in one folder, as ``interp sae train`` makes it: cache, train, save, and resume.

The folder holds ``run.json`` (the run record: the settings, the input width, whether the run is complete
and, once it is, its last training record), ``activations/`` (the activation store, resumable by shard),
``checkpoint/`` (the trainer's checkpoint, resumable by step) and the dictionary (``sae/`` in the SAELens
format, or ``transcoders/`` in circuit-tracer's). SAEs and transcoders go through the same steps, in
:meth:`RunFolder.train`; a plan (:class:`SAEPlan`, :class:`TranscoderPlan`) holds what differs: the hooks
cached, the trainer called, the format saved. The record is written atomically (:mod:`interp.atomic`), so a
run cut short while writing it keeps the previous record whole and resumes.

Running the same settings again resumes. A run that has not saved a training checkpoint holds no training,
so its retry may change the training settings: it is compared only on what its cached activations depend on
(:data:`CACHE_KEYS`), or on nothing when it cached nothing either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp import distributed
from interp.atomic import write_atomic
from interp.resumable import Layout, Stage, claim
from interp.sae import formats
from interp.sae.formats.transcoders import save_transcoders
from interp.sae.training.state import CHECKPOINT, load_checkpoint
from interp.sae.training.transcoders import transcoder_hooks
from interp.store import cache_activations, windows

RECORD = "run.json"
CACHE_KEYS = ("data_sha256", "model", "hook", "context")
"""The settings the cached activations depend on; the others only matter once training has taken a step."""
LAYOUT = Layout(
    record=RECORD,
    what="a run of interp sae train",
    other="another run",
    remedy="use another folder to start over",
    key="settings",
)
"""How a training run keeps its record (:mod:`interp.resumable`): ``run.json``, the settings under ``settings``."""


@dataclass(frozen=True)
class TrainedRun:
    """What :meth:`RunFolder.train` made: the dictionary, the rows it was trained on, and a line for people."""

    dictionary: Any
    cached_rows: int
    summary: str


@dataclass(frozen=True)
class RunFolder:
    """The folder of one training run, and the record of the run it holds (``None`` for a new folder).

    Attributes:
        path: the folder (``--out``).
        settings: the run's settings as ``run.json`` records them (the command's flags, and the data's hash).
        earlier: the record of the run being resumed, or ``None``.
    """

    path: Path
    settings: dict[str, Any]
    earlier: dict[str, Any] | None = None

    @classmethod
    def open(cls, path: Path, settings: dict[str, Any]) -> RunFolder:
        """The run in ``path`` with ``settings``: a new or empty folder, or the same run to resume
        (claimed as :mod:`interp.resumable` claims every resumable folder; the record is written by
        :meth:`train`).

        Raises:
            ValueError: ``path`` holds files but no run record, a damaged record, a run with other settings
                (each difference named), or a training checkpoint that cannot be read.
        """
        trained = (path / "checkpoint" / CHECKPOINT).is_file()
        cached = (path / "activations").is_dir() and any((path / "activations").iterdir())

        def stage(record: dict[str, Any]) -> Stage:
            done = bool(record.get("complete", False))
            if not (trained or done or cached):
                return Stage("new", ())  # nothing cached, nothing trained: any settings may retry
            return Stage("complete" if done else "resume", list(settings) if trained or done else CACHE_KEYS)

        found = claim(path, settings, LAYOUT, stage=stage)
        if found.state == "new":
            return cls(path, settings)
        if trained:
            load_checkpoint(
                path / "checkpoint" / CHECKPOINT
            )  # a truncated checkpoint is refused now, by name
        return cls(path, settings, found.record)

    def write_record(self, d_in: int | None, final: dict[str, Any] | None = None) -> None:
        """Write ``run.json`` atomically: complete, with the last training record, once ``final`` is given."""
        record: dict[str, Any] = {"settings": self.settings, "d_in": d_in, "complete": final is not None}
        if final is not None:
            record["final"] = final
        text = json.dumps(record, indent=2) + "\n"
        write_atomic(self.path / RECORD, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    def train(
        self,
        model: Any,
        texts: list[str],
        plan: SAEPlan | TranscoderPlan,
        *,
        context: int,
        batch_size: int,
        shard_rows: int,
        progress: bool,
    ) -> TrainedRun:
        """Cut ``texts`` into windows, cache ``plan.hooks``, train and save: the same for every kind.

        Under ``torchrun`` each rank caches and trains its share; rank 0 writes the record and the dictionary.

        Raises:
            ValueError: the run being resumed read another width, or ``context`` exceeds the model's ``n_ctx``;
                both before anything is written.
        """
        width = self.earlier.get("d_in") if self.earlier is not None else None
        if plan.d_in is not None and width not in (None, plan.d_in):
            raise ValueError(
                f"--out {self.path} was trained with d_in={width}, but {plan.hooks[0]} has width {plan.d_in}"
            )
        if context > model.cfg.n_ctx:
            raise ValueError(f"--context {context} is longer than the model's n_ctx={model.cfg.n_ctx}")
        if distributed.rank() == 0:
            self.path.mkdir(parents=True, exist_ok=True)
            self.write_record(plan.d_in)
        distributed.barrier()
        batches = windows(model, texts, context, batch_size)
        store = cache_activations(
            model, batches, plan.hooks, self.path / "activations", shard_rows=shard_rows, progress=progress
        )
        dictionary = plan.train(store, self.path / "checkpoint", progress)
        training = plan.training(dictionary)
        if distributed.rank() == 0:
            plan.save(dictionary, self.path / plan.saved_as)
            self.write_record(plan.width(dictionary), final=training["history"][-1])
        return TrainedRun(
            dictionary, len(store), plan.summary(dictionary, self.path / plan.saved_as, len(store))
        )


@dataclass(frozen=True)
class SAEPlan:
    """An SAE at one hook, trained by :func:`~interp.sae.training.train` and saved in the SAELens format.

    Attributes:
        hook: the hook it reads.
        d_in: the hook's width (``None`` when the config cannot tell it).
        options: :func:`~interp.sae.training.train`'s settings (:class:`~interp.sae.training.TrainSettings`).
    """

    hook: str
    d_in: int | None
    options: dict[str, Any]
    saved_as = "sae"

    @property
    def hooks(self) -> list[str]:
        return [self.hook]

    def train(self, store: Any, checkpoint_dir: Path, progress: bool) -> Any:
        from interp.sae.training import train  # the package's name, read when the run starts

        return train(
            store, hook_name=self.hook, checkpoint_dir=checkpoint_dir, progress=progress, **self.options
        )

    def save(self, sae: Any, folder: Path) -> None:
        formats.save(sae, folder)

    def training(self, sae: Any) -> dict[str, Any]:
        return sae.cfg.metadata["training"]

    def width(self, sae: Any) -> int:
        return sae.d_in

    def summary(self, sae: Any, folder: Path, cached_rows: int) -> str:
        last = self.training(sae)["history"][-1]
        return (
            f"{folder}: {self.options['architecture']} SAE, d_in={sae.d_in}, d_sae={sae.d_sae}, trained on "
            f"{cached_rows:,} cached rows ({self.training(sae)['tokens']:,} rows seen); "
            f"final fraction of variance unexplained {last['fvu']:.3f}, L0 {last['l0']:.1f}"
        )


@dataclass(frozen=True)
class TranscoderPlan:
    """Transcoders from each layer's input site to its output site, trained by
    :func:`~interp.sae.training.train_transcoders` and saved in circuit-tracer's format.

    Attributes:
        kind: ``transcoder``, ``skip-transcoder`` or ``clt``.
        layers: the layers trained.
        sites: the hooks read and written inside a block, e.g. ``("ln2.hook_normalized", "hook_mlp_out")``.
        d_in: the model's ``d_model``.
        options: :func:`~interp.sae.training.train`'s settings, ``d_sae`` being the features per layer.
    """

    kind: str
    layers: list[int]
    sites: tuple[str, str]
    d_in: int
    options: dict[str, Any]
    saved_as = "transcoders"

    @property
    def hooks(self) -> list[str]:
        return transcoder_hooks(self.layers, *self.sites)

    def train(self, store: Any, checkpoint_dir: Path, progress: bool) -> Any:
        from interp.sae.training import train_transcoders  # the package's name, read when the run starts

        options = dict(self.options)
        options["d_transcoder"] = options.pop("d_sae")
        return train_transcoders(
            store,
            kind=self.kind,
            layers=self.layers,
            input_site=self.sites[0],
            output_site=self.sites[1],
            checkpoint_dir=checkpoint_dir,
            progress=progress,
            **options,
        )

    def save(self, tc: Any, folder: Path) -> None:
        save_transcoders(tc, folder)

    def training(self, tc: Any) -> dict[str, Any]:
        return tc.metadata["training"]

    def width(self, tc: Any) -> int:
        return tc.d_model

    def summary(self, tc: Any, folder: Path, cached_rows: int) -> str:
        last = self.training(tc)["history"][-1]
        return (
            f"{folder}: {self.kind} ({self.options['architecture']}) at layers {self.layers}, d_transcoder="
            f"{tc.d_transcoder}, trained on {cached_rows:,} cached rows; final fraction of variance unexplained "
            f"{last['fvu']:.3f}, L0 {last['l0']:.1f} per layer"
        )
