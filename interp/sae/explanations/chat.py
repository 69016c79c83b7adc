"""What is asked of a language model and what comes back, whichever backend answers.

A :class:`ChatRequest` is a conversation and its sampling settings; its :meth:`~ChatRequest.key` hashes them
with the model's name, so the cache finds an answer again and a result row can name the prompt it came from.
A :class:`ChatReply` is the text, the model that wrote it and, when asked for, each generated token with its
likeliest alternatives (from which the scorers read a probability for AUC). A request that failed after the
backend's own retries comes back as a :class:`~interp.sae.explanations.failure.Failure` with a one-line
reason, so that one feature's failure is reported for that feature and the others go on.

Every backend has the same two methods: ``name`` (the model that answers) and ``complete(requests, on_reply)``,
which answers a list of requests in order and hands each answer to ``on_reply`` the moment it has it, so that
the cache keeps every answer a stopped run received; how it runs them (batched through one model, or several in
flight at an HTTP endpoint) is its own business.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from interp.sae.explanations.failure import Failure


@dataclass(frozen=True)
class ChatRequest:
    """A conversation to continue.

    Attributes:
        messages: ``(role, content)`` pairs; roles ``"system"``, ``"user"``, ``"assistant"``.
        max_tokens: the most tokens to generate.
        temperature: 0 for greedy decoding.
        top_logprobs: with more than 0, the backend returns that many likeliest tokens at each step.
    """

    messages: tuple[tuple[str, str], ...]
    max_tokens: int
    temperature: float = 0.0
    top_logprobs: int = 0

    def key(self, model: str) -> str:
        """sha256 of the model, the messages and the sampling settings: the cache key and the prompt's hash."""
        payload = json.dumps({"model": model, **asdict(self)}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()

    def as_openai(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]


@dataclass(frozen=True)
class TokenChoice:
    """One generated token and the likeliest tokens at its step, as ``(text, log probability)``."""

    token: str
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class ChatReply:
    """An answer: its text, the model that wrote it, and (if asked) the tokens with their alternatives."""

    text: str
    model: str
    tokens: tuple[TokenChoice, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        tokens = None if self.tokens is None else [[t.token, [list(p) for p in t.top]] for t in self.tokens]
        return {"text": self.text, "model": self.model, "tokens": tokens}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatReply:
        tokens = data.get("tokens")
        choices = None
        if tokens is not None:
            choices = tuple(TokenChoice(t, tuple((str(a), float(b)) for a, b in top)) for t, top in tokens)
        return cls(str(data["text"]), str(data["model"]), choices)


OnReply = Callable[[int, "ChatReply | Failure"], Any]
"""Called with a request's place in the list and its answer, as soon as the answer is there."""


class Backend(Protocol):
    """Anything that answers chat requests: a model interp loads, or an OpenAI-compatible endpoint."""

    @property
    def name(self) -> str: ...

    def complete(
        self, requests: Sequence[ChatRequest], on_reply: OnReply | None = None
    ) -> list[ChatReply | Failure]:
        """The answers to ``requests``, in order; each is also given to ``on_reply`` when it arrives."""
        ...


def binary_probabilities(tokens: Sequence[TokenChoice]) -> list[float]:
    """P(1) / (P(0) + P(1)) at each generated token that holds a ``0`` or a ``1``, in order.

    At each such step the probabilities of the likeliest alternatives that contain ``0`` are summed against
    those that contain ``1`` (an alternative with both counts as ``0``), delphi's reading of an answer such as
    ``[1, 0, 1]``; a step where neither appears among the alternatives gives 0.
    """
    found = []
    for choice in tokens:
        if "0" not in choice.token and "1" not in choice.token:
            continue
        p0 = sum(math.exp(lp) for text, lp in choice.top if "0" in text)
        p1 = sum(math.exp(lp) for text, lp in choice.top if "0" not in text and "1" in text)
        found.append(p1 / (p0 + p1) if p0 + p1 > 0 else 0.0)
    return found
