"""A matrix of query-part x key-part terms, and the tables people read it through.

Every split of an attention score is such a matrix: rows are what the query is made of, columns what the key is
made of, and the entries sum to the score (or to a difference of two scores). The parts are values
(:class:`~interp.analysis.node.Node`): the components of the stream in QK attribution
(:class:`~interp.analysis.qk.score.QKAttribution`), the nodes of an attribution graph when attention is
explained in them (:class:`~interp.circuits.features.attention.HeadScore`). :class:`QKMatrix` is what every
reader uses (the matrix, its total, its :meth:`~QKMatrix.top` terms, tables and marginals); a single score keeps
its two factors (:class:`QKScore`), a difference of two scores keeps the two
(:class:`~interp.analysis.qk.difference.QKDifference`), and both form the matrix when it is read: a graph's nodes
number in the thousands, and their matrix is a thousand times larger than its factors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import pandas as pd
import torch

from interp.analysis.node import Node


class Term(NamedTuple):
    """One entry of the matrix: the query part, the key part, and their term."""

    query: Node
    key: Node
    value: float


def top_entries(matrix: torch.Tensor, n: int, what: str = "top") -> list[tuple[int, int, float]]:
    """The ``n`` entries of a 2-D ``matrix`` largest in absolute value, largest first, as ``(row, column,
    value)``: the one ranking of terms, head loadings and tables.

    >>> top_entries(torch.tensor([[1.0, -3.0], [2.0, 0.5]]), 2)
    [(0, 1, -3.0), (1, 0, 2.0)]
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what} must be a positive integer, got {n!r}")
    flat = matrix.flatten()
    order = flat.abs().argsort(descending=True)[:n].tolist()
    columns = matrix.shape[1]
    return [(i // columns, i % columns, float(flat[i])) for i in order]


@dataclass(frozen=True, kw_only=True)
class QKMatrix:
    """``matrix [query part, key part]`` and the parts that index it (see the module docstring).

    Attributes:
        query_components: the row parts, in order.
        key_components: the column parts, in order.
    """

    query_components: tuple[Node, ...] = field(repr=False)
    key_components: tuple[Node, ...] = field(repr=False)

    @property
    def matrix(self) -> torch.Tensor:
        """Float32 ``[n_query_components, n_key_components]``; its sum is :attr:`total`."""
        raise NotImplementedError(f"{type(self).__name__} does not say how its matrix is formed")

    @property
    def total(self) -> float:
        """The sum of every term: the score (or the score difference) the matrix decomposes."""
        return _total(self.matrix)

    @property
    def query_labels(self) -> list[str]:
        return [c.label for c in self.query_components]

    @property
    def key_labels(self) -> list[str]:
        return [c.label for c in self.key_components]

    def top(self, n: int = 20) -> list[Term]:
        """The ``n`` terms largest in absolute value, largest first."""
        return self._top(self.matrix, n)

    def _top(self, matrix: torch.Tensor, n: int) -> list[Term]:
        return [
            Term(self.query_components[i], self.key_components[j], value)
            for i, j, value in top_entries(matrix, n)
        ]

    def table(self, top: int = 20) -> pd.DataFrame:
        """The ``top`` query x key pairs by absolute value, largest first (:meth:`top`).

        Columns: ``query``, ``key`` (readable labels such as ``L3H4@"tired"``, ``MLP7@"animal"``),
        ``query_at`` and ``key_at`` (the position each label's token is at; missing for biases), ``value`` and
        ``share`` (``value / total``).
        """
        matrix = self.matrix  # formed once for the terms and the total
        rows, total = self._top(matrix, top), _total(matrix)
        return pd.DataFrame(
            {
                "query": [q.label for q, _, _ in rows],
                "key": [k.label for _, k, _ in rows],
                "query_at": pd.array([_shown_at(q) for q, _, _ in rows], dtype="Int64"),
                "key_at": pd.array([_shown_at(k) for _, k, _ in rows], dtype="Int64"),
                "value": [v for _, _, v in rows],
                "share": [v / total if total else float("nan") for _, _, v in rows],
            }
        )

    def query_marginal(self) -> pd.DataFrame:
        """Each query part against the whole key (row sums), largest in absolute value first."""
        return _marginal(self.query_components, self.matrix.sum(1))

    def key_marginal(self) -> pd.DataFrame:
        """Each key part against the whole query (column sums), largest in absolute value first."""
        return _marginal(self.key_components, self.matrix.sum(0))


@dataclass(frozen=True, kw_only=True)
class QKScore(QKMatrix):
    """One score's matrix, kept as its factors: ``matrix = query_parts @ key_parts.T * scale``, formed in the
    parts' precision.

    Attributes:
        query_parts: ``[n_query_components, d]`` each row part's vector on the query side.
        key_parts: ``[n_key_components, d]`` each column part's vector on the key side.
        scale: the layer's score scale.
    """

    query_parts: torch.Tensor = field(repr=False)
    key_parts: torch.Tensor = field(repr=False)
    scale: float

    @property
    def matrix(self) -> torch.Tensor:
        return (self.query_parts @ self.key_parts.T * self.scale).float()


def _total(matrix: torch.Tensor) -> float:
    return float(matrix.double().sum())


def _shown_at(component: Node) -> int | None:
    """The position whose token a label shows: a head's source, else where the component was written."""
    return component.source if component.source is not None else component.position


def _marginal(components: tuple[Node, ...], values: torch.Tensor) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "component": [c.label for c in components],
            "kind": [c.kind for c in components],
            "layer": pd.array([c.layer for c in components], dtype="Int64"),
            "head": pd.array([c.head for c in components], dtype="Int64"),
            "at": pd.array([_shown_at(c) for c in components], dtype="Int64"),
            "value": values.double().tolist(),
        }
    )
    order = frame["value"].abs().sort_values(ascending=False, kind="stable").index
    return frame.loc[order].reset_index(drop=True)
