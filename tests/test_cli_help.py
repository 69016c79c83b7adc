"""Help that helps: every command and study says what it does, what each flag means, its default, an example."""

from __future__ import annotations

import argparse
import re

import pytest

from interp.cli import build_parser, main
from interp.registry import list_studies


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every parser a user can ask for help: ``interp``, each subcommand, ``interp sae train``."""
    found = {"interp": build_parser()}
    queue = [found["interp"]]
    while queue:
        parser = queue.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found[sub.prog] = sub
                    queue.append(sub)
    return found


def _options(help_text: str) -> list[str]:
    """Each flag's entry in a help text (the flag and the lines of its description)."""
    section = help_text.split("options:\n", 1)[1].split("\n\n", 1)[0]
    return [entry for entry in re.split(r"\n(?=  -)", section) if not entry.strip().startswith("-h, --help")]


@pytest.mark.parametrize("prog", sorted(_commands()))
def test_every_command_describes_itself_its_flags_and_an_example(prog):
    parser = _commands()[prog]
    assert parser.description and len(parser.description.split()) >= 5, prog
    assert parser.epilog and parser.epilog.startswith("example:\n  interp"), prog
    text = parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        assert action.help and len(action.help.split()) >= 2, f"{prog} {action.dest} has no help"
    for entry in _options(text):
        assert re.search(r"\(default|default:|\(required\)", entry), f"{prog}: no default in {entry!r}"
        assert "default: None" not in entry, f"{prog}: a default of None says nothing: {entry!r}"


def test_help_shows_the_defaults_and_points_to_the_right_command(capsys):
    assert main(["generate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "tokens to generate at most (default: 64)" in out
    assert re.search(r"--sample\s+sample instead of taking the most likely token\s+\(default: off\)", out)
    assert main(["explain", "--tok", "it"]) == 2
    assert "see 'interp explain --help'" in capsys.readouterr().err
    assert main(["models", "--help"]) == 0
    assert "List the models that ship as packages" in capsys.readouterr().out


def test_study_help_and_the_list_of_studies_say_what_each_asks(capsys):
    assert main(["study", "--help"]) == 0
    assert "Run one of the registered studies" in capsys.readouterr().out
    assert main(["study"]) == 0
    listing = capsys.readouterr().out
    assert ":main" not in listing  # what each study asks, not where its code is
    for name in list_studies():
        assert re.search(rf"^{name}\s+\S.{{20,}}$", listing, flags=re.MULTILINE), (name, listing)


@pytest.mark.parametrize("name", sorted(list_studies()))
def test_every_study_describes_its_flags_and_their_defaults(name, capsys):
    assert main(["study", name, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: interp study {name}")
    for entry in _options(text):
        assert re.search(r"\(default|default:|\(required\)", entry), f"{name}: no default in {entry!r}"
        assert "default: None" not in entry, f"{name}: a default of None says nothing: {entry!r}"
