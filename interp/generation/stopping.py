"""When a row stops, and the text it has produced so far.

A row stops at its end-of-sequence token, at the first occurrence of a stop string in its decoded text, or
after ``max_new_tokens``. Stop strings are matched in text, not tokens, so one that spans several tokens (or
starts inside one) is found. The text grows incrementally: each step decodes only a short window of tokens
(the last token that completed text plus the new ones) and emits what is new once it is complete, so a
character whose UTF-8 bytes are split over byte-level tokens is never shown half-made, and the cost per step
does not grow with the length of the row.

What a row has produced ends before its stop: ``text`` ends right before the stop string (or the EOS token),
and ``new_tokens`` ends before the token in which the stop begins. When a stop string starts inside a token
(``" home.\\n"`` with the stop ``"\\n"``), ``text`` keeps the characters of that token before the stop, so it
may be a few characters longer than what ``new_tokens`` decodes to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

REPLACEMENT = "\ufffd"  # what a decoder gives for incomplete UTF-8


def check_stop_strings(stop_strings: str | Sequence[str] | None, tokenizer: Any) -> tuple[str, ...]:
    """The stop strings as a tuple; raises ``ValueError`` for an empty one or when there is no tokenizer."""
    if stop_strings is None:
        return ()
    stops = (stop_strings,) if isinstance(stop_strings, str) else tuple(stop_strings)
    for index, stop in enumerate(stops):
        if not isinstance(stop, str):
            raise TypeError(f"stop_strings[{index}] is a {type(stop).__name__}, not a str: {stop!r}")
        if not stop:
            raise ValueError(
                f"stop_strings[{index}] is empty; an empty string would match before the first token. "
                "Give non-empty strings such as '\\n'"
            )
    if stops and tokenizer is None:
        raise ValueError("stop_strings are matched in decoded text, and this model has no tokenizer")
    return stops


@dataclass
class RowText:
    """The decoded new text of one row, grown one token at a time.

    Args:
        decode: ``decode(ids) -> str`` of the tokenizer.
        context: the last few prompt tokens, decoded with the first new ones so that a decoder that drops a
            leading space at the start of a text (SentencePiece) keeps it.
    """

    decode: Callable[[list[int]], str]
    context: list[int]
    text: str = ""
    ends: list[int] = field(default_factory=list)  # len(text) after each token
    _prefix: int = 0  # window start in ``_all``
    _read: int = 0  # tokens of ``_all`` whose text is in ``text``

    def __post_init__(self) -> None:
        self._all = list(self.context)
        self._read = len(self._all)

    def add(self, token: int) -> str:
        """Append a token; returns the text it completes (empty while a character is incomplete)."""
        self._all.append(token)
        window = self._all[self._prefix :]
        before = self.decode(self._all[self._prefix : self._read])
        after = self.decode(window)
        piece = ""
        if len(after) > len(before) and not after.endswith(REPLACEMENT):
            piece = after[len(before) :]
            self.text += piece
            self._prefix, self._read = self._read, len(self._all)
        self.ends.append(len(self.text))
        return piece

    def flush(self) -> str:
        """Whatever is still held back at the end (an incomplete character is shown as decoded)."""
        before = self.decode(self._all[self._prefix : self._read])
        after = self.decode(self._all[self._prefix :])
        piece = after[len(before) :] if after.startswith(before) else ""
        self.text += piece
        self._prefix = self._read = len(self._all)
        if self.ends:
            self.ends[-1] = len(self.text)
        return piece


def find_stop(text: str, searched: int, stops: Sequence[str]) -> int | None:
    """The earliest start of a stop string that ends past ``searched`` characters of ``text``, or ``None``."""
    found = None
    for stop in stops:
        at = text.find(stop, max(0, searched - len(stop) + 1))
        if at >= 0 and (found is None or at < found):
            found = at
    return found


def held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of ``text`` could be the start of a stop string (not yet safe to show)."""
    longest = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:n]):
                longest = n
                break
    return longest


class Streamer:
    """Hands each row's text to ``callback(row, text)`` as it becomes final.

    Text that could be the start of a stop string is held back until it is known not to be one, so what is
    streamed is exactly the row's final ``text``.
    """

    def __init__(self, callback: Callable[[int, str], Any], stops: Sequence[str]) -> None:
        self.callback = callback
        self.stops = stops
        self.shown: dict[int, int] = {}

    def update(self, row: int, text: str, end: int | None = None) -> None:
        """Show ``text`` up to what is safe; with ``end`` (the row has finished), up to ``end`` exactly."""
        upto = end if end is not None else len(text) - held_back(text, self.stops)
        start = self.shown.get(row, 0)
        if upto > start:
            self.callback(row, text[start:upto])
            self.shown[row] = upto
