"""A feature's examples as the explainer and the scorers see them: token strings with an activation at each.

A :class:`~interp.feature_id.FeatureId` names a feature by its layer and its index in that layer, and numbers it
as circuit-tracer's graph files do (``featureIndex``), so an explanation finds its nodes in a graph. A
:class:`FeatureRecord` holds a feature's activating examples (each tagged with the
activation quantile it was drawn from) and examples where it does not fire at all.

Examples are cut to a window of ``context`` tokens (32 by default, as delphi cuts them, so that a small scorer
reads short texts): an activating example keeps its chosen token three quarters of the way in, so that most of
the window is the context that led up to it; a non-activating window is a stretch of tokens where the feature is
zero at every token, activations read in the example's own, longer context. Where the examples hold no such
stretch of ``context`` tokens, both kinds are cut shorter, to the same length (:meth:`FeatureRecord.scoring_length`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from interp.feature_id import FeatureId

OPEN, CLOSE = "<<", ">>"
"""The marks put around the tokens a prompt points at (the convention of delphi's and OpenAI's prompts)."""


@dataclass(frozen=True)
class Example:
    """A text as tokens, with the feature's activation at each token.

    Attributes:
        tokens: the token strings, which concatenate to the text.
        activations: one value per token.
        quantile: the activation quantile it was drawn from (0 for the top examples), or ``None`` for an example
            where the feature does not fire.
        position: the token it was chosen for (the dashboards' ``train_token_ind``).
    """

    tokens: tuple[str, ...]
    activations: tuple[float, ...]
    quantile: int | None = None
    position: int = 0

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.activations):
            raise ValueError(
                f"an example has {len(self.tokens)} tokens but {len(self.activations)} activations; "
                "give one activation per token"
            )

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def max_activation(self) -> float:
        return max(self.activations, default=0.0)

    @property
    def active(self) -> bool:
        return self.max_activation > 0

    def window(self, length: int) -> Example:
        """The ``length`` tokens around :attr:`position`, which lands three quarters of the way in (or as near
        as the example's ends allow)."""
        if len(self.tokens) <= length:
            return self
        start = min(max(self.position - (length - length // 4), 0), len(self.tokens) - length)
        return self._cut(start, start + length)

    def zero_runs(self) -> list[tuple[int, int]]:
        """The maximal ``(start, end)`` runs of tokens where the activation is zero."""
        runs, start = [], None
        for i, a in enumerate((*self.activations, 1.0)):  # a sentinel closes the last run
            if a == 0 and start is None:
                start = i
            elif a != 0 and start is not None:
                runs.append((start, i))
                start = None
        return runs

    def zero_windows(self, length: int) -> list[Example]:
        """Non-overlapping windows of ``length`` tokens where the activation is zero at every token, each run
        cut from its start."""
        return [
            self._cut(start + k * length, start + (k + 1) * length)
            for start, end in self.zero_runs()
            for k in range((end - start) // length)
        ]

    def _cut(self, start: int, end: int) -> Example:
        return Example(
            self.tokens[start:end],
            self.activations[start:end],
            self.quantile,
            min(max(self.position - start, 0), end - start - 1),
        )

    def marked(self, mark: Sequence[bool]) -> str:
        """The text with each run of marked tokens between :data:`OPEN` and :data:`CLOSE`."""
        pieces, inside = [], False
        for token, on in zip(self.tokens, mark, strict=True):
            if on != inside:
                pieces.append(OPEN if on else CLOSE)
                inside = on
            pieces.append(token)
        if inside:
            pieces.append(CLOSE)
        return "".join(pieces)

    def strong(self, threshold: float) -> list[bool]:
        """Which tokens reach ``threshold`` times the example's largest activation (an example that never fires
        has none)."""
        top = self.max_activation
        return [top > 0 and a >= threshold * top for a in self.activations]

    def levels(self) -> list[int]:
        """The activations as whole numbers from 0 to 10, 10 at the example's largest (as explainers are shown
        them)."""
        top = self.max_activation
        return [min(10, max(0, math.ceil(10 * a / top))) if top > 0 else 0 for a in self.activations]


@dataclass(frozen=True)
class FeatureRecord:
    """What is known of one feature: where it fires, and where it does not.

    Attributes:
        id: the feature.
        activating: examples where it fires, each with its quantile (0 for the top examples).
        non_activating: examples where it is zero at every token.
        density: the fraction of tokens where it fires, if known.
        source: the file it was read from (for messages).
    """

    id: FeatureId
    activating: tuple[Example, ...]
    non_activating: tuple[Example, ...] = ()
    density: float | None = None
    source: str = ""

    def split(self, n_explain: int, n_test: int, seed: int) -> tuple[list[Example], list[Example]]:
        """Disjoint examples for the explainer and for the scorers.

        Each quantile's examples are shuffled (seeded by ``seed`` and the feature), and taken in turn from every
        quantile, so that both sets span the quantiles: the scorers' ``n_test`` first, then the explainer's
        ``n_explain`` from what is left, the explainer's in quantile order (top first). An explanation is
        scored on examples it was not written from.
        """
        rng = random.Random(f"{seed}:{self.id.index}")
        by_quantile: dict[int, list[Example]] = {}
        for example in _distinct(self.activating):
            by_quantile.setdefault(example.quantile or 0, []).append(example)
        pools = [by_quantile[q] for q in sorted(by_quantile)]
        for pool in pools:
            rng.shuffle(pool)
        test = _round_robin(pools, n_test)
        explain = _round_robin(pools, n_explain)
        explain.sort(key=lambda e: (e.quantile or 0, -e.max_activation))
        return explain, test

    def scoring_length(self, n: int, context: int, minimum: int) -> int | None:
        """The longest window, from ``context`` down to ``minimum`` tokens, of which ``n`` can be cut where the
        feature is zero (else the length that gives the most such windows; ``None`` if none of even ``minimum``
        tokens exists). Examples kept short around their token (a dashboard's 16 tokens before it and 4 after)
        hold shorter zero runs than delphi's 32; activating and non-activating examples are then cut to the same
        shorter length, so that length says nothing about which is which."""
        runs = [end - start for e in (*self.non_activating, *self.activating) for start, end in e.zero_runs()]
        best: tuple[int, int] | None = None
        for length in range(context, minimum - 1, -1):
            count = sum(r // length for r in runs)
            if count >= n:
                return length
            if count and (best is None or count > best[0]):
                best = (count, length)
        return None if best is None else best[1]

    def negatives(self, n: int, context: int, seed: int) -> list[Example]:
        """``n`` examples of ``context`` tokens (or fewer, if fewer exist) where the feature is zero throughout:
        the non-activating examples given first, then zero windows of the activating ones; each drawn at random,
        seeded."""
        rng = random.Random(f"{seed}:{self.id.index}:negatives")
        given = _distinct([w for e in self.non_activating for w in e.zero_windows(context)])
        rng.shuffle(given)
        if len(given) >= n:
            return given[:n]
        seen = {e.text for e in given}
        cut = [
            w
            for w in _distinct([w for e in self.activating for w in e.zero_windows(context)])
            if w.text not in seen
        ]
        rng.shuffle(cut)
        return (given + cut)[:n]


def _distinct(examples: Sequence[Example]) -> list[Example]:
    """The examples with each text kept once (the first)."""
    seen, kept = set(), []
    for example in examples:
        if example.text not in seen:
            seen.add(example.text)
            kept.append(example)
    return kept


def _round_robin(pools: list[list[Example]], n: int) -> list[Example]:
    """Take up to ``n`` examples, one from each non-empty pool in turn, removing them from the pools."""
    taken: list[Example] = []
    while len(taken) < n and any(pools):
        for pool in pools:
            if pool and len(taken) < n:
                taken.append(pool.pop())
    return taken
