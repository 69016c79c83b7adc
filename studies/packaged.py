"""The packaged models a study measures, loaded so that a missing package skips that part, not the study.

Studies that set their claim against trained models take those models from ``interp.load``. A model whose
package is not installed should not stop the random-model half of a study: the study reports what it
measured and names what it skipped, with the install command ``interp.load`` puts in its error.
"""

from __future__ import annotations

import argparse

from interp import HookedTransformer, load


def load_packaged(
    name: str, device: str | None, dtype: str | None
) -> tuple[HookedTransformer, None] | tuple[None, str]:
    """``(model, None)``, or ``(None, reason)`` when the model's package is not installed.

    The reason is ``interp.load``'s message, which names the package and the command that installs it.
    """
    try:
        return load(name, device=device, dtype=dtype), None
    except FileNotFoundError as err:
        return None, str(err)


def add_models_argument(parser: argparse.ArgumentParser, default: tuple[str, ...]) -> None:
    """``--models a,b``: the packaged models to measure, comma separated ('' for none)."""
    parser.add_argument(
        "--models", default=",".join(default), help="packaged models, comma separated ('' for none)"
    )


def parse_models(value: str) -> tuple[str, ...]:
    """The names in a ``--models`` value; an empty string means none."""
    return tuple(name for name in value.split(",") if name)
