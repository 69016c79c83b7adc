"""The scaffold every study shares: a checked command line, and the report set up from it.

A study is its hypothesis, its measurements and its figures. What every study does alike lives here:

- :func:`start` parses the command line (:func:`interp.registry.study_parser` and the study's own flags) and
  checks, before any model is loaded and before any work, everything that can be checked: the report folder
  (:func:`interp.report.check_report_folder`), the device (parsed by ``interp.load``'s ``parse_device`` and
  then asked for an empty tensor, so that a device this torch cannot use fails now), the dtype, and each
  model name or path (found, not loaded); :func:`check_data_files` checks the data files the flags name. A
  mistake raises :class:`StudyInputError`, a ``ValueError`` with a one-line message, which ``interp study``
  prints as one line; nothing is written.
- :meth:`StudyRun.report` makes the :class:`~interp.report.Report` with the report folder, seed, command,
  device and dtype filled in; :meth:`StudyRun.load` loads a model on the run's device and dtype;
  :meth:`StudyRun.finish` writes the report and says where.

A model the user names that cannot be found is an error, never a silent skip. A study's *default* models that
are packaged but not installed are skipped when the study can run without them (``model_required=False``),
and :attr:`StudyRun.skipped` says why, for the report; the run prints a line about each.

Example:
    >>> from interp.registry import study_parser
    >>> parser = study_parser("demo", "A demonstration.", default_model=None)
    >>> run = start(parser, ["--out", "reports/demo", "--quiet"])  # doctest: +SKIP
    >>> report = run.report("Demo", config={"n": 1})  # doctest: +SKIP
    >>> run.finish(report)  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from interp import distributed, preflight
from interp.load import load
from interp.preflight import check_placement, find_model
from interp.registry import StudyParser
from interp.report import Report, check_report_folder


class StudyInputError(ValueError):
    """A study's command line asks for something that cannot run; the message says what, in one line."""


@dataclass(frozen=True, kw_only=True)
class StudyRun:
    """One run of a study, with its command line checked.

    Attributes:
        name: The study's name.
        args: The parsed command line.
        device: The device asked for (``None``: the default, the CPU).
        dtype: The dtype asked for (``None``: the default, float32).
        models: The models to measure, each found on disk: what ``--model`` or ``--models`` named, or the
            defaults that are installed.
        skipped: Default models left out because their package is not installed, with the reason.
        command: The command line to record in the manifest.
        started: ``time.perf_counter()`` when the checks passed.
    """

    name: str
    args: argparse.Namespace
    device: torch.device | None
    dtype: torch.dtype | None
    models: tuple[str, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    command: list[str]
    started: float
    placement: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str | None:
        """The one model of a ``--model`` study, or ``None`` when it was skipped."""
        return self.models[0] if self.models else None

    def load(self, name_or_path: str):
        """``interp.load`` of a model, on the run's device (or its ``--device-map``) and in its dtype."""
        return load(name_or_path, device=self.device, dtype=self.dtype, **self.placement)

    def report(
        self,
        title: str,
        *,
        subtitle: str | None = None,
        config: Any = None,
        model: str | None = None,
        model_path: str | os.PathLike[str] | None = None,
        data_paths: Sequence[str | os.PathLike[str]] = (),
        device: Any = None,
        dtype: Any = None,
    ) -> Report:
        """The study's report, with its folder, seed, command, device and dtype taken from the run.

        ``device`` and ``dtype`` default to the run's (the CPU and float32 when none was asked for); pass a
        model's own when the study measured one.
        """
        return Report(
            self.args.out,
            title,
            subtitle=subtitle,
            command=self.command,
            seed=self.args.seed,
            config=config,
            model=model,
            model_path=model_path,
            data_paths=data_paths,
            device=device if device is not None else self.device or "cpu",
            dtype=dtype if dtype is not None else self.dtype or "float32",
            started=self.started,  # the manifest's wall time is the whole run's, not the report's
        )

    def step(self, what: str) -> contextlib.AbstractContextManager[None]:
        """A long step of the run, said on stderr as it starts and ends (see :func:`step`)."""
        return step(what, study=self.name, enabled=not self.args.quiet)

    def finish(self, report: Report) -> int:
        """Write ``report``, say where unless ``--quiet``, and return the exit status, 0."""
        path = report.write()
        if not self.args.quiet:
            print(f"wrote {path} in {time.perf_counter() - self.started:.1f} s")
        return 0


@contextlib.contextmanager
def step(what: str, *, study: str, enabled: bool = True) -> Iterator[None]:
    """Say that a step of a study starts (``interp study NAME: WHAT ...``) and, when it ends, how long it took.

    For the steps that run for seconds without a progress bar of their own (patching, probes, figures), so
    that a long run never goes quiet. Only rank 0 speaks under ``torchrun``; ``enabled=False`` (``--quiet``)
    says nothing.
    """
    speak = enabled and distributed.rank() == 0
    if speak:
        print(f"interp study {study}: {what} ...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    yield
    if speak:
        print(f"interp study {study}: {what}: done in {time.perf_counter() - began:.1f} s", file=sys.stderr)


def start(parser: StudyParser, argv: Sequence[str] | None = None) -> StudyRun:
    """Parse a study's command line and check it all before any work.

    Data files depend on the flags, so a study checks them next with :func:`check_data_files`.

    Args:
        parser: From :func:`interp.registry.study_parser`, with the study's own flags added.
        argv: The arguments after ``interp study NAME``; ``None`` reads ``sys.argv``.

    Raises:
        StudyInputError: The report folder, the device, the dtype or a model is unusable; the message names
            it and what would do instead. Bad flags exit with status 2 and one line (argparse).
    """
    args = parser.parse_args(argv)
    command = ["interp", "study", parser.study, *argv] if argv is not None else list(sys.argv)
    try:
        check_report_folder(args.out)
    except OSError as err:
        raise StudyInputError(str(err)) from err
    device = check_device(args.device, parser.study, parser.cpu_only)
    dtype = check_dtype(args.dtype, parser.study, parser.cpu_only)
    placement = _check_placement(args, parser.study, parser.cpu_only)
    models, skipped = _check_models(parser, args)
    for name, reason in skipped.items():
        if not args.quiet:
            print(f"interp study {parser.study}: skipping {name}: {reason}", file=sys.stderr)
    return StudyRun(
        name=parser.study,
        args=args,
        device=device,
        dtype=dtype,
        models=models,
        skipped=skipped,
        command=command,
        started=time.perf_counter(),
        placement=placement,
    )


def check_data_files(paths: Sequence[str | os.PathLike[str]], hint: str = "") -> None:
    """Check that every data file a study will read exists.

    Raises:
        StudyInputError: A path is not a file; ``hint`` (such as the names of shipped data sets) is added.
    """
    for path in paths:
        if not Path(path).is_file():
            what = "a folder, not a file" if Path(path).is_dir() else "no such file"
            raise StudyInputError(f"data {str(path)!r}: {what}; pass a data file{hint and ' ' + hint}")


def check_device(value: str | None, study: str = "this", cpu_only: str | None = None) -> torch.device | None:
    """The device ``--device`` names, if this torch can use it (:func:`interp.preflight.check_device`).

    Raises:
        StudyInputError: Not a device; a device this torch cannot use (``cuda`` on a CPU-only build, an
            ordinal past the last GPU); or not the CPU for a study that runs on the CPU only.
    """
    try:
        return preflight.check_device(value, study, cpu_only)
    except ValueError as err:
        raise StudyInputError(str(err)) from err


def _check_placement(args: argparse.Namespace, study: str, cpu_only: str | None) -> dict[str, Any]:
    """``interp.load``'s placement keywords from ``--device-map`` and its companions, checked."""
    if cpu_only is not None and args.device_map is not None:
        raise StudyInputError(f"the {study} study runs on the CPU only ({cpu_only}); drop --device-map")
    try:
        return check_placement(args)
    except ValueError as err:
        raise StudyInputError(str(err)) from err


def check_dtype(value: str | None, study: str = "this", cpu_only: str | None = None) -> torch.dtype | None:
    """The dtype ``--dtype`` names (:func:`interp.preflight.check_dtype`).

    Raises:
        StudyInputError: Not a floating torch dtype, or not float32 for a study that runs in float32 only.
    """
    try:
        return preflight.check_dtype(value, study, cpu_only)
    except ValueError as err:
        raise StudyInputError(str(err)) from err


def _check_models(parser: StudyParser, args: argparse.Namespace) -> tuple[tuple[str, ...], dict[str, str]]:
    """The models to measure and the default ones skipped; a model the user named must be found."""
    if parser.default_models is not None:
        given = getattr(args, "models", None)
        names = (
            parser.default_models
            if given is None
            else tuple(n.strip() for n in given.split(",") if n.strip())
        )
    elif parser.default_model is not None:
        given = getattr(args, "model", None)
        names = (parser.default_model,) if given is None else ((given,) if given.strip() else ())
    else:
        return (), {}
    flag = "--models" if parser.default_models is not None else "--model"
    found, skipped = [], {}
    for name in names:
        try:
            find_model(name)
        except FileNotFoundError as err:
            if given is not None or parser.model_required:
                raise StudyInputError(f"{flag} {name}: {err}") from err
            skipped[name] = str(err)
            continue
        found.append(name)
    if parser.default_model is not None and given is None:
        args.model = parser.default_model
    return tuple(found), skipped
