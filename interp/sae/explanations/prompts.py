"""The prompts, kept as text files in ``prompts/``: a system turn, worked examples, and the turn to fill.

A file is a conversation: each turn opens with a line ``=== role ===``. The last turn holds ``{examples}``
(and, for the scorers, ``{explanation}``), filled in one pass, so that text of an example that happens to
contain ``{explanation}`` stays as it is. The worked examples are written for this project; they follow the
shape of delphi's prompts (examples numbered one per line, activating tokens between ``<<`` and ``>>``, answers
as a Python list of 0s and 1s) so that scores can be compared with the field's.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from interp.sae.explanations.chat import ChatRequest

_TURN = re.compile(r"^=== (system|user|assistant) ===\n", flags=re.M)
_SLOT = re.compile(r"\{(examples|explanation)\}")


@cache
def conversation(name: str) -> tuple[tuple[str, str], ...]:
    """The turns of ``prompts/<name>.txt`` as ``(role, text)`` pairs."""
    text = resources.files("interp.sae.explanations").joinpath("prompts", f"{name}.txt").read_text()
    pieces = _TURN.split(text)
    if pieces[0].strip():
        raise ValueError(f"prompts/{name}.txt starts with text before its first '=== role ===' line")
    return tuple((role, body.strip("\n")) for role, body in zip(pieces[1::2], pieces[2::2], strict=True))


def request(name: str, max_tokens: int, top_logprobs: int = 0, **slots: str) -> ChatRequest:
    """The conversation ``name`` with its last turn filled from ``slots``."""
    turns = list(conversation(name))
    role, last = turns[-1]
    turns[-1] = (role, _SLOT.sub(lambda m: slots[m[1]], last))
    return ChatRequest(tuple(turns), max_tokens=max_tokens, top_logprobs=top_logprobs)


def one_line(text: str) -> str:
    """A passage on one line: its line breaks written as ``\\n``, so that the numbered list stays a list."""
    return text.replace("\r", "").replace("\n", "\\n")
