"""Finding and running studies.

``interp`` never imports ``studies``: studies register a ``main(argv) -> int`` callable under the
``interp.studies`` entry-point group (see pyproject.toml), so ``interp study NAME`` runs ours and any that a
user's own package registers the same way.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

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


def study_parser(
    name: str, description: str, *, default_model: str | None = "smollm2-135m"
) -> argparse.ArgumentParser:
    """The arguments every study accepts, so that all of them read the same on the command line."""
    parser = argparse.ArgumentParser(prog=f"interp study {name}", description=description)
    if default_model is not None:
        parser.add_argument("--model", default=default_model, help="packaged name, HF folder or .gguf file")
    parser.add_argument("--out", default=f"reports/{name}", help="report folder to write")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: cpu)")
    parser.add_argument("--dtype", default=None, help="float32 (default), bfloat16, float16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser
