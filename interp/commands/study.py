"""``interp study [NAME] [ARGS]``: run a registered study and write its report, or list what each one asks.

The study's own flags are its own: everything after ``NAME`` goes to it (``interp study coreference --help``
is the study's help). ``interp study --help`` is this command's.
"""

from __future__ import annotations

import argparse

from interp.arguments import add_command


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp study`` to the subcommands."""
    p = add_command(
        sub,
        "study",
        summary="run a registered study and write its report (no name: list the studies)",
        description=(
            "Run one of the registered studies: each is an experiment with a hypothesis, a metric, baselines\n"
            "and intervals, and writes a report folder (index.html, figures, tables, results.json,\n"
            "manifest.json). Without a name, list the studies and the question each asks. Arguments after\n"
            "the name are the study's own: 'interp study NAME --help' lists them."
        ),
        example="interp study coreference --out reports/coreference",
    )
    p.add_argument("name", nargs="?", default=None, help="the study to run (omit to list them)")
    p.add_argument("study_args", nargs=argparse.REMAINDER, help="the study's own arguments")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    """Run the study named, or list them."""
    from interp.registry import describe_studies, run_study

    if args.name is None:
        print(describe_studies())
        return 0
    return run_study(args.name, args.study_args)
