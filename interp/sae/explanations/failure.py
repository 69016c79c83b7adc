"""Why something asked for one feature has no result: one type for every such failure.

A request that got no usable answer, a feature file that is not one, an explainer answer with no explanation in
it, a score with nothing to be computed from: each is a :class:`Failure`, a one-line reason and what was
recorded on the way (the prompts asked, the answers that could not be read), so that it is written into that
feature's row, printed once, and the run goes on. A failure is never cached: the next run asks again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REASON_CHARS = 500
"""The longest reason kept: enough for a URL, an error and the start of what a server sent back."""


@dataclass(frozen=True)
class Failure:
    """No result, and why.

    Attributes:
        reason: one line (a line break becomes a space, and it is cut to :data:`REASON_CHARS`).
        recorded: what was found on the way, kept in the row beside the reason (``{"prompts": [...]}``).
    """

    reason: str
    recorded: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        line = " ".join(self.reason.splitlines()).strip()
        if len(line) > REASON_CHARS:
            line = line[: REASON_CHARS - 3] + "..."
        object.__setattr__(self, "reason", line)

    def to_json(self) -> dict[str, Any]:
        """What a row holds for it: the recorded values and ``error``, the reason."""
        return {**self.recorded, "error": self.reason}

    def within(self, what: str) -> Failure:
        """The same failure, its reason prefixed by where it happened (``"the explainer's request failed"``)."""
        return Failure(f"{what}: {self.reason}", self.recorded)
