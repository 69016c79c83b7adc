"""A deterministic stand-in for the language model, for tests whose numbers must be exact.

It is a backend like any other (``name``, ``complete`` handing each answer to ``on_reply``) and reads the
prompts the package writes, as a model would: the last user turn's ``Feature:`` line and its numbered
``Passage i:`` lines. It answers by a rule instead of by sampling: an explanation names a class of words
(:func:`planted.word_rule`); detection answers 1 for a passage holding a word of that class, fuzzing 1 for a
passage whose every marked word is of it, and the explainer names the class of the marked words. With
``probabilities`` it also returns, for each answer digit, the two likeliest tokens, so the AUC is defined.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from interp.sae.explanations.chat import ChatReply, ChatRequest, OnReply, TokenChoice
from interp.sae.explanations.failure import Failure
from tests.sae.explanations.planted import CLASSES, EXPLANATIONS, word_rule

_PASSAGE = re.compile(r"^Passage (\d+): (.*)$", flags=re.M)
_MARKED = re.compile(r"<<(.*?)>>")


class RuleModel:
    """Answers by rule; ``requests`` keeps every request it was sent, in order."""

    name = "rule-model"

    def __init__(self, probabilities: bool = True, confidence: float = 0.9) -> None:
        self.probabilities = probabilities
        self.confidence = confidence
        self.requests: list[ChatRequest] = []

    def complete(
        self, requests: Sequence[ChatRequest], on_reply: OnReply | None = None
    ) -> list[ChatReply | Failure]:
        self.requests.extend(requests)
        answers = [self._answer(r) for r in requests]
        for i, answer in enumerate(answers):
            if on_reply is not None:
                on_reply(i, answer)
        return answers

    def _answer(self, request: ChatRequest) -> ChatReply:
        system, last = request.messages[0][1], request.messages[-1][1]
        passages = [text for _, text in _PASSAGE.findall(last)]
        if "Explanation:" in system:
            return ChatReply(f"Explanation: {_name(passages)}", self.name)
        rule = word_rule(re.search(r"^Feature: (.*)$", last, flags=re.M)[1])
        answers = []
        for text in passages:
            if rule is None:
                answers.append(0)
            elif "<<" in system:  # fuzzing: every marked word fits
                marked = [w for span in _MARKED.findall(text) for w in span.split()]
                answers.append(int(bool(marked) and all(rule(w) for w in marked)))
            else:
                answers.append(int(any(rule(w) for w in text.replace("<<", " ").replace(">>", " ").split())))
        text = "[" + ", ".join(map(str, answers)) + "]"
        return ChatReply(
            text, self.name, self._tokens(answers) if self.probabilities and request.top_logprobs else None
        )

    def _tokens(self, answers: list[int]) -> tuple[TokenChoice, ...]:
        high, low = math.log(self.confidence), math.log(1 - self.confidence)
        tokens = [TokenChoice("[", (("[", 0.0),))]
        for i, a in enumerate(answers):
            top = (("1", high), ("0", low)) if a else (("0", high), ("1", low))
            tokens.append(TokenChoice(str(a), top))
            tokens.append(TokenChoice(", " if i < len(answers) - 1 else "]", ((", ", 0.0),)))
        return tuple(tokens)


def _name(passages: list[str]) -> str:
    """The explanation of the class most marked words belong to."""
    marked = [w for text in passages for span in _MARKED.findall(text) for w in span.split()]
    counts = {kind: sum(w in members for w in marked) for kind, members in CLASSES.items()}
    return EXPLANATIONS[max(counts, key=counts.get)]
