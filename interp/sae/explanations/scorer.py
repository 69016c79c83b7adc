"""The one interface of a score: prepare what to ask, then judge the answers.

Every scorer, whether a language model answers it (detection, fuzzing) or not (the embedding score), is used in
two steps, so that a run can gather the prompts of many features and scorers into one call to its backend (one
batch through a local model, every request in flight at an endpoint):

- :meth:`Scorer.prepare` turns an explanation and its test examples into a prepared task whose ``requests``
  are the prompts for the model (none for the embedding score);
- :meth:`Scorer.judge` reads the answers to those requests, in order, and returns the score, or a
  :class:`~interp.sae.explanations.failure.Failure` where there is nothing to compute it from.

:meth:`Scorer.score` does both for one explanation. The scorers are listed by name in
:mod:`~interp.sae.explanations.registry`, which is where a run and the command line find them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from interp.sae.explanations.chat import Backend, ChatReply, ChatRequest
    from interp.sae.explanations.failure import Failure
    from interp.sae.explanations.records import Example


class Prepared(Protocol):
    """A scorer's task for one explanation; ``requests`` are what the language model is asked, in order."""

    @property
    def requests(self) -> tuple[ChatRequest, ...]: ...


class Score(Protocol):
    """A score of one explanation, as a feature's row holds it."""

    def to_json(self) -> dict[str, Any]: ...


class Scorer(Protocol):
    """What every scorer does (subclass it to get :meth:`score`)."""

    name: str

    def prepare(
        self, explanation: str, test: Sequence[Example], negatives: Sequence[Example], key: Any = 0
    ) -> Prepared:
        """The task for one explanation, scored on activating ``test`` and non-activating ``negatives``
        examples; ``key`` (a feature's number) seeds what is drawn for it.

        Raises:
            ValueError: ``test`` or ``negatives`` is empty.
        """
        ...

    def judge(
        self, prepared: Prepared, replies: Sequence[ChatReply | Failure], model: str | None
    ) -> Score | Failure:
        """The score, from the answers to ``prepared.requests`` (given by ``model``, ``None`` if none was)."""
        ...

    def score(
        self,
        explanation: str,
        test: Sequence[Example],
        negatives: Sequence[Example],
        *,
        backend: Backend | None = None,
        key: Any = 0,
    ) -> Score | Failure:
        """Prepare, ask ``backend`` (where the scorer asks a model) and judge, for one explanation."""
        prepared = self.prepare(explanation, test, negatives, key)
        if not prepared.requests:
            return self.judge(prepared, [], None)
        if backend is None:
            raise ValueError(
                f"the {self.name} score asks a language model {len(prepared.requests)} questions; give backend="
            )
        return self.judge(prepared, backend.complete(prepared.requests), backend.name)
