"""Differences of attention scores, split the same way: why this key rather than that one, and what changed
between twin prompts.

A difference of two scores is a difference of two matrices, and the matrices are made comparable by giving
each component a *role* that does not depend on where the score was taken: a component written at the query
(key) position plays the role "at the query (key)", whichever position that is; a head's write split by
source keeps its source position, mapped into the first prompt. ``matrix[i, j]`` of the difference is the
first score's term for roles ``(i, j)`` minus the second's (a role one side lacks, such as a feature active at
only one key, counts as zero there), so the matrix sums to the difference exactly.

Twin prompts ("... because it was too tired" / "... too wide") are aligned by character spans: a token of the
first text maps to the token of the second covering the same characters, counted from the start inside the
common prefix of the two texts and from the end inside their common suffix (special tokens map by order).
The differing words in the middle map to nothing; their components appear on their own side.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.node import Node
from interp.analysis.qk.matrix import QKMatrix
from interp.analysis.qk.prompt import Prompt, as_prompt
from interp.analysis.qk.score import QKAttribution, qk_attribution, qk_names
from interp.dictionary import SparseDictionary


@dataclass(frozen=True, kw_only=True)
class QKDifference(QKMatrix):
    """``first.score - second.score`` split into query x key terms; ``matrix.sum()`` is it. Each score's parts
    sit at given rows and columns of the difference's; a part one score lacks counts as zero there.

    Attributes:
        first, second: the two scores (:class:`~interp.analysis.qk.score.QKAttribution`, or a graph's
            :class:`~interp.circuits.features.attention.HeadScore`).
        rows, columns: for each score, the row (column) of the difference each of its query (key) parts is at.
    """

    first: QKMatrix = field(repr=False)
    second: QKMatrix = field(repr=False)
    rows: tuple[tuple[int, ...], tuple[int, ...]] = field(repr=False)
    columns: tuple[tuple[int, ...], tuple[int, ...]] = field(repr=False)

    def __repr__(self) -> str:
        return (
            f"QKDifference({len(self.query_components)} x {len(self.key_components)} terms: difference "
            f"{self.difference:.4g})"
        )

    @property
    def matrix(self) -> torch.Tensor:
        """The first score's matrix minus the second's, each placed at its rows and columns (in float64)."""
        out = torch.zeros(len(self.query_components), len(self.key_components), dtype=torch.float64)
        sides = ((self.first, 0, 1.0), (self.second, 1, -1.0))
        for score, side, sign in sides:
            r, c = torch.tensor(self.rows[side]), torch.tensor(self.columns[side])
            out.index_put_((r[:, None], c[None, :]), sign * score.matrix.double(), accumulate=True)
        return out.float()

    @property
    def difference(self) -> float:
        """``first.score - second.score``."""
        return self.first.score - self.second.score  # type: ignore[attr-defined]


@torch.no_grad()
def qk_key_difference(
    model: nn.Module,
    tokens: Any,
    layer: int,
    head: int,
    query: int,
    key: int,
    other_key: int,
    *,
    transcoders: SparseDictionary | None = None,
    cache: ActivationCache | None = None,
    by_source: bool = True,
) -> QKDifference:
    """``score(query, key) - score(query, other_key)`` of one head, split into terms ("why 'animal' rather
    than 'street'"). Arguments as in :func:`~interp.analysis.qk.score.qk_attribution`; one forward serves both."""
    prompt = as_prompt(model, tokens)
    if key == other_key:
        raise ValueError(f"key and other_key are both {key}; a key difference needs two different keys")
    if cache is None:
        names = qk_names(model, layer, by_source=by_source, transcoders=transcoders)
        _, cache = model.run_with_cache(prompt.ids, prompt.mask, names_filter=names)
    kwargs = dict(transcoders=transcoders, cache=cache, by_source=by_source)
    first = qk_attribution(model, prompt, layer, head, query, key, **kwargs)
    second = qk_attribution(model, prompt, layer, head, query, other_key, **kwargs)
    return _difference(first, second, {p: p for p in range(prompt.ids.shape[1])})


@torch.no_grad()
def qk_twin_difference(
    model: nn.Module,
    text: str,
    twin: str,
    layer: int,
    head: int,
    query: int,
    key: int,
    *,
    transcoders: SparseDictionary | None = None,
    by_source: bool = True,
) -> QKDifference:
    """One head's score from ``query`` to ``key`` in ``text`` minus the aligned score in ``twin`` ("what
    changed when 'tired' became 'wide'").

    Args:
        text, twin: the two prompts (the model's tokenizer reads them).
        query, key: positions in ``text``'s tokens; the twin's are the tokens covering the same characters.

    Raises:
        ValueError: the query or key token has no token covering the same characters in ``twin``.
    """
    if getattr(model, "tokenizer", None) is None:
        raise ValueError(
            "qk_twin_difference aligns the twins by characters and needs a model with a tokenizer"
        )
    first_prompt, second_prompt = as_prompt(model, text), as_prompt(model, twin)
    align = align_twins(first_prompt, second_prompt)
    mapped = []
    for what, pos in (("query", query), ("key", key)):
        pos = first_prompt.check_position(pos, what)
        if pos not in align:
            raise ValueError(
                f"{what} token {pos} {first_prompt.tokens[pos]!r} of the first text has no token covering the "
                f"same characters in the twin; choose a token in the texts' common prefix or suffix"
            )
        mapped.append(align[pos])
    kwargs = dict(transcoders=transcoders, by_source=by_source)
    first = qk_attribution(model, text, layer, head, query, key, **kwargs)
    second = qk_attribution(model, twin, layer, head, mapped[0], mapped[1], **kwargs)
    return _difference(first, second, {b: a for a, b in align.items()})


def align_twins(first: Prompt, second: Prompt) -> dict[int, int]:
    """Positions of ``first`` -> positions of ``second`` whose tokens cover the same characters."""
    if first.text is None or second.text is None or first.offsets is None or second.offsets is None:
        raise ValueError("twin alignment needs both prompts as text")
    a, b = first.text, second.text
    prefix = len(os.path.commonprefix([a, b]))
    suffix = len(os.path.commonprefix([a[prefix:][::-1], b[prefix:][::-1]]))
    shift = len(b) - len(a)
    spans = {tuple(span): pos for pos, span in _real_spans(second).items()}
    special_b = _special(second)
    align: dict[int, int] = {}
    for pos, (start, end) in _real_spans(first).items():
        if end <= prefix:
            target = spans.get((start, end))
        elif start >= len(a) - suffix:
            target = spans.get((start + shift, end + shift))
        else:
            target = None
        if target is not None:
            align[pos] = target
    for pos_a, pos_b in zip(_special(first), special_b, strict=False):
        align[pos_a] = pos_b
    return align


def _real_spans(prompt: Prompt) -> dict[int, tuple[int, int]]:
    spans = prompt.offsets.tolist()
    real = prompt.mask[0].tolist() if prompt.mask is not None else [1] * len(spans)
    return {p: tuple(s) for p, (s, r) in enumerate(zip(spans, real, strict=True)) if r and s[1] > s[0]}


def _special(prompt: Prompt) -> list[int]:
    """Real positions covering no character (BOS, ``[CLS]``...), in order."""
    spans = _real_spans(prompt)
    real = prompt.mask[0].tolist() if prompt.mask is not None else [1] * prompt.ids.shape[1]
    return [p for p, r in enumerate(real) if r and p not in spans]


def _role(component: Node, at: int, sources: dict[int, int]) -> tuple:
    """What a component is, independent of where the score was taken (see the module docstring)."""
    written = "here" if component.position == at else component.position
    source = component.source
    if source is not None:
        source = sources.get(source, ("unaligned", source))
    return (
        component.kind,
        written,
        component.layer,
        component.head,
        source,
        component.feature,
        component.name,
    )


def _difference(first: QKAttribution, second: QKAttribution, sources: dict[int, int]) -> QKDifference:
    """``first - second`` on the union of roles; ``sources`` maps the second prompt's positions to the first's."""
    identity = {p: p for p in range(first.prompt.ids.shape[1])}
    rows, row_labels = _union(
        first.query_components, first.query, second.query_components, second.query, identity, sources
    )
    cols, col_labels = _union(
        first.key_components, first.key, second.key_components, second.key, identity, sources
    )
    return QKDifference(
        query_components=tuple(row_labels),
        key_components=tuple(col_labels),
        first=first,
        second=second,
        rows=(tuple(rows[0]), tuple(rows[1])),
        columns=(tuple(cols[0]), tuple(cols[1])),
    )


def _union(
    first: tuple[Node, ...],
    first_at: int,
    second: tuple[Node, ...],
    second_at: int,
    first_sources: dict[int, int],
    second_sources: dict[int, int],
) -> tuple[tuple[list[int], list[int]], list[Node]]:
    """Indices of each side's components into the union of their roles, and one component per role."""
    index: dict[tuple, int] = {}
    shown: list[Node] = []
    picks: tuple[list[int], list[int]] = ([], [])
    for side, (components, at, sources) in enumerate(
        ((first, first_at, first_sources), (second, second_at, second_sources))
    ):
        for component in components:
            role = _role(component, at, sources)
            if role not in index:
                index[role] = len(shown)
                shown.append(component)
            elif side == 1 and shown[index[role]].shown != component.shown:
                old = shown[index[role]]
                shown[index[role]] = old.showing(f"{old.shown}|{component.shown}")
            picks[side].append(index[role])
    return picks, shown
