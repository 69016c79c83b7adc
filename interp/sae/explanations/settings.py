"""What decides the numbers of a feature's row: the scorers, how many examples each side sees, how they are cut.

A row records the settings it was made with; a rerun with other settings makes the row again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from interp.sae.explanations.registry import SCORERS, check_names


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What decides a row's numbers (a row made with other settings is made again).

    Attributes:
        scorers: which scores to compute, by name (:data:`~interp.sae.explanations.registry.SCORERS`).
        n_explain: activating examples shown to the explainer.
        n_test: activating examples scored, with as many non-activating ones.
        context: tokens per example shown (delphi's 32).
        min_context: the shortest examples scored, where the feature files hold no runs of ``context`` tokens
            where the feature is zero (see :meth:`~interp.sae.explanations.records.FeatureRecord.scoring_length`).
        per_prompt: examples per scorer prompt (delphi's 5).
        threshold: fraction of an example's largest activation from which a token is marked.
        probabilities: ask the scorer model for its likeliest tokens, for the AUC.
        seed: the split of the examples, their order in prompts, the wrongly marked tokens, the bootstraps.
    """

    scorers: tuple[str, ...] = tuple(SCORERS)
    n_explain: int = 20
    n_test: int = 20
    context: int = 32
    min_context: int = 8
    per_prompt: int = 5
    threshold: float = 0.3
    probabilities: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        check_names(self.scorers)
        for name in ("n_explain", "n_test", "context", "min_context", "per_prompt"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; give 1 or more")
        if self.min_context > self.context:
            raise ValueError(
                f"min_context={self.min_context} is more than context={self.context}; give at most {self.context}"
            )
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold={self.threshold}; give a fraction in (0, 1]")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "scorers": list(self.scorers)}
