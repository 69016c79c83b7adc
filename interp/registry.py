"""Finding and running studies.

``interp`` never imports ``studies``: studies register a ``main(argv) -> int`` callable under the
``interp.studies`` entry-point group (see pyproject.toml), so ``interp study NAME`` runs ours and any that a
user's own package registers the same way. :func:`study_parser` gives every study the same flags; the checks
made on them before any work, and the report set up from them, are in :mod:`interp.study`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

from interp.arguments import ArgumentParser, add_placement_arguments

GROUP = "interp.studies"


def list_studies() -> dict[str, str]:
    """Registered study names and the callables they point to."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def load_study(name: str) -> Callable[[Sequence[str]], int]:
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            return ep.load()
    known = ", ".join(sorted(list_studies())) or "none (is the project installed with pip install -e .?)"
    raise ValueError(f"unknown study {name!r}; registered studies: {known}")


def run_study(name: str | None, argv: Sequence[str]) -> int:
    """Run study ``name`` with its own command-line arguments; with no name, list the studies."""
    if name is None:
        for study, target in sorted(list_studies().items()):
            print(f"{study:14s} {target}")
        return 0
    return int(load_study(name)(list(argv)) or 0)


class StudyParser(ArgumentParser):
    """A study's command line: flags are never abbreviated, and a mistake is one line and exit status 2.

    Prefix matching is off (``allow_abbrev=False``, from :class:`interp.arguments.ArgumentParser`), so
    ``--model`` is never taken for ``--models``. The attributes say what :func:`interp.study.start` checks
    before any work: ``default_model`` or ``default_models`` (used when the flag is not given),
    ``model_required`` and ``cpu_only``.
    """

    def __init__(
        self,
        name: str,
        description: str,
        *,
        default_model: str | None = None,
        default_models: tuple[str, ...] | None = None,
        model_required: bool = False,
        cpu_only: str | None = None,
    ) -> None:
        super().__init__(prog=f"interp study {name}", description=description)
        self.study = name
        self.default_model = default_model
        self.default_models = default_models
        self.model_required = model_required
        self.cpu_only = cpu_only


def study_parser(
    name: str,
    description: str,
    *,
    default_model: str | None = "smollm2-135m",
    default_models: tuple[str, ...] | None = None,
    model_required: bool = False,
    cpu_only: str | None = None,
) -> StudyParser:
    """The arguments every study accepts, so that all of them read the same on the command line.

    Args:
        name: The study's name, as in ``interp study NAME``.
        description: One line for ``--help``.
        default_model: Adds ``--model`` (one model) with this default; ``None`` for no ``--model``.
        default_models: Adds ``--models a,b`` (packaged names or paths, comma separated, ``''`` for none)
            with these defaults.
        model_required: The study cannot run without its model, so a default model that is not installed
            is an error too (otherwise the study skips it and says so in its report).
        cpu_only: The study runs on the CPU in float32 only, for this reason; ``--device`` and ``--dtype``
            accept nothing else.
    """
    parser = StudyParser(
        name,
        description,
        default_model=default_model,
        default_models=default_models,
        model_required=model_required,
        cpu_only=cpu_only,
    )
    if default_model is not None:
        parser.add_argument(
            "--model", default=None, help=f"packaged name, HF folder or .gguf file (default: {default_model})"
        )
    if default_models is not None:
        parser.add_argument(
            "--models",
            default=None,
            help=f"models, comma separated ('' for none; default: {','.join(default_models)})",
        )
    parser.add_argument("--out", default=f"reports/{name}", help="report folder to write")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: cpu)")
    add_placement_arguments(parser)
    parser.add_argument("--dtype", default=None, help="float32 (default), bfloat16, float16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def count(minimum: int = 1) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of at least ``minimum``, refused in one line otherwise.

    >>> count(1)("3")
    3
    """

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or number < minimum:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least {minimum}")
        return number

    parse.__name__ = f"count(minimum={minimum})"
    return parse


def counts(minimum: int = 1) -> Callable[[str], tuple[int, ...]]:
    """An argparse ``type``: comma-separated whole numbers of at least ``minimum``, at least one.

    >>> counts(1)("4,16")
    (4, 16)
    """

    def parse(value: str) -> tuple[int, ...]:
        parts = [p.strip() for p in value.split(",")]
        if not all(p.lstrip("-").isdigit() and int(p) >= minimum for p in parts):
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a comma-separated list of whole numbers of at least {minimum}"
            )
        return tuple(int(p) for p in parts)

    parse.__name__ = f"counts(minimum={minimum})"
    return parse
