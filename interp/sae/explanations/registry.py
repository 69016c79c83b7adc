"""The scorers by name: what ``--scorer`` and :class:`~interp.sae.explanations.settings.Settings` choose from.

Each entry says what answers the scorer (the explainer's language model, or a sentence encoder the caller
loads) and builds it from a run's settings. A new scorer is a class that follows
:class:`~interp.sae.explanations.scorer.Scorer` and one entry here; the run, the command line and its help
find it from this table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from interp.sae.explanations.classifier import DetectionScorer, FuzzingScorer
from interp.sae.explanations.embedding import EmbeddingScorer
from interp.sae.explanations.scorer import Scorer


class ScorerSettings(Protocol):
    """The settings a scorer is built from (:class:`~interp.sae.explanations.settings.Settings` has them)."""

    per_prompt: int
    threshold: float
    probabilities: bool
    seed: int


@dataclass(frozen=True)
class ScorerKind:
    """A scorer as the registry lists it.

    Attributes:
        name: how runs, rows and ``--scorer`` name it.
        summary: what it asks, in one line (the command's help).
        answered_by: ``"model"``: its prompts go to the explainer's language model; ``"encoder"``: it needs a
            sentence encoder, which the caller loads and hands in as an
            :class:`~interp.sae.explanations.embedding.EmbeddingScorer`.
        make: builds it from the settings and the embedding scorer handed in (if any).
    """

    name: str
    summary: str
    answered_by: Literal["model", "encoder"]
    make: Callable[[ScorerSettings, EmbeddingScorer | None], Scorer]


def _classifier(kind: type[DetectionScorer] | type[FuzzingScorer]) -> Callable[..., Scorer]:
    def make(settings: ScorerSettings, embedding: EmbeddingScorer | None) -> Scorer:
        return kind(settings.per_prompt, settings.threshold, settings.probabilities, settings.seed)

    return make


def _embedding(settings: ScorerSettings, embedding: EmbeddingScorer | None) -> Scorer:
    if embedding is None:
        raise ValueError(
            "the embedding score needs a sentence encoder: pass "
            "embedding=EmbeddingScorer(SentenceEmbedder(interp.load('minilm-l6')))"
        )
    return embedding


SCORERS: dict[str, ScorerKind] = {
    kind.name: kind
    for kind in (
        ScorerKind(
            "detection",
            "told the explanation, does the model pick the activating examples among others?",
            "model",
            _classifier(DetectionScorer),
        ),
        ScorerKind(
            "fuzzing",
            "does it tell correctly marked activating tokens from randomly marked ones?",
            "model",
            _classifier(FuzzingScorer),
        ),
        ScorerKind(
            "embedding",
            "is the explanation nearer the activating examples in a sentence embedding?",
            "encoder",
            _embedding,
        ),
    )
}


def scorer_names(text: str) -> tuple[str, ...]:
    """The scorers a comma-separated list names, each once, checked against :data:`SCORERS`.

    >>> scorer_names("fuzzing, detection,fuzzing")
    ('fuzzing', 'detection')

    Raises:
        ValueError: a name that is not a scorer, or no name at all.
    """
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    return check_names(names)


def check_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` if every one is a scorer; else a one-line error naming those that are not."""
    names = tuple(names)
    unknown = [n for n in names if n not in SCORERS]
    if not names:
        raise ValueError(f"no scorer named; choose from {', '.join(SCORERS)} (comma separated)")
    if unknown:
        what = "is not a scorer" if len(unknown) == 1 else "are not scorers"
        raise ValueError(
            f"{', '.join(map(repr, unknown))} {what}; choose from {', '.join(SCORERS)} (comma separated)"
        )
    return names


def make_scorers(
    names: Iterable[str], settings: ScorerSettings, embedding: EmbeddingScorer | None = None
) -> list[Scorer]:
    """The scorers ``names`` lists, built from ``settings`` (the embedding scorer is the one handed in)."""
    return [SCORERS[name].make(settings, embedding) for name in check_names(names)]
