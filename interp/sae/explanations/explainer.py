"""The explainer: a prompt that shows a feature's examples and asks for a short explanation, and its reading.

The examples are shown as delphi's default explainer shows them: each passage with the tokens above
``threshold`` times its largest activation between ``<<`` and ``>>``, and below it the marked tokens with their
activation as a whole number from 1 to 10. The answer's last line that starts with ``Explanation:`` is the
explanation; a model that does not use the form (small models often do not) gives its first non-empty line
instead. An answer that holds no text at all is not an explanation, and its feature is reported as such.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from interp.sae.explanations.chat import ChatRequest
from interp.sae.explanations.prompts import one_line, request
from interp.sae.explanations.records import Example

_LABEL = re.compile(r"^\W*explanation\W*:\s*(.*)$", flags=re.I)
MAX_CHARS = 200


@dataclass(frozen=True)
class Explainer:
    """How a feature is shown to the explainer model.

    Attributes:
        threshold: a token is marked when it reaches this fraction of its example's largest activation.
        max_listed: the most marked tokens listed (with strengths) per passage.
        max_tokens: the most tokens the answer may take.
    """

    threshold: float = 0.3
    max_listed: int = 10
    max_tokens: int = 48

    def request(self, examples: Sequence[Example]) -> ChatRequest:
        """The request for an explanation of the feature these examples show."""
        if not examples:
            raise ValueError("an explanation needs at least one activating example")
        return request("explain", self.max_tokens, examples=self.show(examples))

    def show(self, examples: Sequence[Example]) -> str:
        blocks = []
        for i, example in enumerate(examples, start=1):
            top = example.max_activation
            mark = [top > 0 and a > self.threshold * top for a in example.activations]
            levels = example.levels()
            listed = [
                f'"{one_line(t)}" {levels[j]}'
                for j, t in enumerate(example.tokens)
                if mark[j] and levels[j] > 0
            ]
            strengths = ", ".join(listed[: self.max_listed])
            blocks.append(f"Passage {i}: {one_line(example.marked(mark))}\nStrengths: {strengths}")
        return "\n".join(blocks)

    @staticmethod
    def parse(answer: str) -> str | None:
        """The explanation in ``answer``, or ``None`` if it holds none."""
        lines = [line.strip() for line in answer.splitlines() if line.strip()]
        labelled = [m[1].strip() for m in map(_LABEL.match, lines) if m is not None and m[1].strip()]
        text = labelled[-1] if labelled else (lines[0] if lines else "")
        text = text.strip().strip("\"'`*").strip()
        return text[:MAX_CHARS] or None
