"""A whole training run in one folder, as ``interp sae train`` makes it: cache, train, save, and resume.

The folder holds ``run.json`` (the run record: the settings, the input width, whether the run is complete
and, once it is, its last training record), ``activations/`` (the activation store, resumable by shard),
``checkpoint/`` (the trainer's checkpoint, resumable by step) and the dictionary (``sae/`` in the SAELens
format, or ``transcoders/`` in circuit-tracer's). Every kind goes through the same steps, in
:meth:`RunFolder.train`, with one :class:`Plan`: the kind, the hooks cached, the settings of the one trainer.
Only the windows that hold the rows ``--tokens`` asks for are cached. The record is written atomically
(:mod:`interp.atomic`), so a run cut short while writing it keeps the previous record whole and resumes.

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
from interp.sae.formats import save_dictionary
from interp.sae.training.kinds import transcoder_hooks
from interp.sae.training.state import CHECKPOINT, load_checkpoint
from interp.sae.training.trainer import fit_warning
from interp.store import cache_activations, windows
from interp.store.meta import StoreMismatchError, read_meta

RECORD = "run.json"
CACHE_KEYS = ("data_sha256", "model", "hook", "context", "tokens")
"""The settings the cached activations depend on (``--tokens``: how many windows are cached); the others only
matter once training has taken a step."""
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
    """What :meth:`RunFolder.train` made: the dictionary, the rows it was trained on, a line for people, and a
    warning when the dictionary reconstructs worse than the mean (:func:`~interp.sae.training.trainer.fit_warning`)."""

    dictionary: Any
    cached_rows: int
    summary: str
    warning: str | None = None


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
        plan: Plan,
        *,
        context: int,
        batch_size: int,
        shard_rows: int,
        progress: bool,
    ) -> TrainedRun:
        """Cut ``texts`` into windows, cache ``plan.hooks`` for the windows the run needs, train and save: the
        same for every kind.

        Only the windows that hold the rows ``--tokens`` asks for are cached (a run without ``--tokens`` makes
        one pass over every window). Under ``torchrun`` each rank caches and trains its share; rank 0 writes the
        record and the dictionary.

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
        every = windows(model, texts, context, batch_size)
        batches = needed_windows(every, plan.options.get("tokens"), plan.options.get("min_position", 0))
        activations = self.path / "activations"
        if _cached_every_window(activations, len(every)):
            batches = every  # a run cached before --tokens bounded the cache keeps the cache it has
        store = cache_activations(
            model, batches, plan.hooks, activations, shard_rows=shard_rows, progress=progress
        )
        dictionary = plan.train(store, self.path / "checkpoint", progress)
        training = dictionary.metadata["training"]
        if distributed.rank() == 0:
            save_dictionary(dictionary, self.path / plan.saved_as)
            self.write_record(dictionary.d_in, final=training["history"][-1])
        summary = plan.summary(dictionary, self.path / plan.saved_as, len(store))
        return TrainedRun(dictionary, len(store), summary, fit_warning(training))


@dataclass(frozen=True)
class Plan:
    """What a run trains, read by :func:`~interp.sae.training.train` and saved by
    :func:`~interp.sae.formats.save_dictionary` (an SAE in the SAELens format, transcoders in circuit-tracer's).

    Attributes:
        kind: ``sae``, ``transcoder``, ``skip-transcoder`` or ``clt``.
        d_in: the width of the hook read (``None`` when the config cannot tell it).
        options: :func:`~interp.sae.training.train`'s settings (:class:`~interp.sae.training.TrainSettings`;
            ``d_sae`` being the features per layer).
        hook: the hook an SAE reads.
        layers: the layers transcoders are trained at.
        sites: the hooks transcoders read and write inside a block, e.g. ``("ln2.hook_normalized",
            "hook_mlp_out")``.
    """

    kind: str
    d_in: int | None
    options: dict[str, Any]
    hook: str | None = None
    layers: list[int] | None = None
    sites: tuple[str, str] | None = None

    @property
    def saved_as(self) -> str:
        """The folder the dictionary is written to, inside the run's."""
        return "sae" if self.kind == "sae" else "transcoders"

    @property
    def hooks(self) -> list[str]:
        """The hooks cached, in the order training reads them."""
        return [self.hook] if self.kind == "sae" else transcoder_hooks(self.layers, *self.sites)

    def train(self, store: Any, checkpoint_dir: Path, progress: bool) -> Any:
        from interp.sae.training import train  # the package's name, read when the run starts

        if self.kind == "sae":
            where: dict[str, Any] = {"hook_name": self.hook}
        else:
            where = {"layers": self.layers, "input_site": self.sites[0], "output_site": self.sites[1]}
        return train(
            store, kind=self.kind, checkpoint_dir=checkpoint_dir, progress=progress, **where, **self.options
        )

    def summary(self, dictionary: Any, folder: Path, cached_rows: int) -> str:
        """A line for people: what was trained, on how much, and how well."""
        training = dictionary.metadata["training"]
        last = training["history"][-1]
        if self.kind == "sae":
            return (
                f"{folder}: {self.options['architecture']} SAE, d_in={dictionary.d_in}, d_sae={dictionary.d_sae}, "
                f"trained on {cached_rows:,} cached rows ({training['tokens']:,} rows seen); "
                f"final fraction of variance unexplained {last['fvu']:.3f}, L0 {last['l0']:.1f}"
            )
        return (
            f"{folder}: {self.kind} ({self.options['architecture']}) at layers {self.layers}, d_transcoder="
            f"{dictionary.d_transcoder}, trained on {cached_rows:,} cached rows; final fraction of variance "
            f"unexplained {last['fvu']:.3f}, L0 {last['l0']:.1f} per layer"
        )


def needed_windows(
    batches: list[tuple[Any, Any]], tokens: int | None, min_position: int
) -> list[tuple[Any, Any]]:
    """The first windows of ``batches`` (``(ids, mask)``, padded right) whose rows from ``min_position`` on add
    up to ``tokens`` (the last batch cut to the window that reaches it); all of them for ``tokens=None``."""
    if tokens is None:
        return batches
    kept, rows = [], 0
    for ids, mask in batches:
        total = rows + (mask.sum(-1) - min_position).clamp(min=0).cumsum(0)  # rows up to each window
        if int(total[-1]) >= tokens:
            n = int((total < tokens).sum()) + 1
            return [*kept, (ids[:n], mask[:n])]
        kept.append((ids, mask))
        rows = int(total[-1])
    return kept


def _cached_every_window(folder: Path, n_batches: int) -> bool:
    """Whether ``folder`` holds a store of all ``n_batches`` batches of windows, as runs made it before only
    the windows ``--tokens`` needs were cached."""
    try:
        meta = read_meta(folder)
    except StoreMismatchError:
        return False
    n_windows = None if meta is None else meta["identity"].get("data", {}).get("n_batches")
    return n_windows == n_batches
