"""A matrix of query-component x key-component terms, and the tables people read it through.

Both a single attention score (:class:`~interp.analysis.qk.score.QKAttribution`) and a difference of two scores
(:mod:`interp.analysis.qk.difference`) are such a matrix: rows are what the query is made of, columns what the
key is made of, and the entries sum to the score (or the difference).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from interp.analysis.node import Node


@dataclass(frozen=True, kw_only=True)
class QKMatrix:
    """``matrix [query component, key component]`` with the components that index it.

    Attributes:
        matrix: float32 ``[n_query_components, n_key_components]``; ``matrix.sum()`` is :attr:`total`.
        query_components: the row components, in order.
        key_components: the column components, in order.
    """

    matrix: torch.Tensor
    query_components: tuple[Node, ...]
    key_components: tuple[Node, ...]

    @property
    def total(self) -> float:
        """The sum of every term: the score (or the score difference) the matrix decomposes."""
        return float(self.matrix.double().sum())

    @property
    def query_labels(self) -> list[str]:
        return [c.label for c in self.query_components]

    @property
    def key_labels(self) -> list[str]:
        return [c.label for c in self.key_components]

    def table(self, top: int = 20) -> pd.DataFrame:
        """The ``top`` query x key pairs by absolute value, largest first.

        Columns: ``query``, ``key`` (readable labels such as ``L3H4@"tired"``, ``MLP7@"animal"``),
        ``query_at`` and ``key_at`` (the position each label's token is at; missing for biases), ``value`` and
        ``share`` (``value / total``).
        """
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ValueError(f"top must be a positive integer, got {top!r}")
        flat = self.matrix.flatten()
        order = flat.abs().argsort(descending=True)[:top].tolist()
        n_key = self.matrix.shape[1]
        rows = [(self.query_components[i // n_key], self.key_components[i % n_key], flat[i]) for i in order]
        total = self.total
        return pd.DataFrame(
            {
                "query": [q.label for q, _, _ in rows],
                "key": [k.label for _, k, _ in rows],
                "query_at": pd.array([_shown_at(q) for q, _, _ in rows], dtype="Int64"),
                "key_at": pd.array([_shown_at(k) for _, k, _ in rows], dtype="Int64"),
                "value": [float(v) for _, _, v in rows],
                "share": [float(v) / total if total else float("nan") for _, _, v in rows],
            }
        )

    def query_marginal(self) -> pd.DataFrame:
        """Each query component against the whole key (row sums), largest in absolute value first."""
        return _marginal(self.query_components, self.matrix.sum(1))

    def key_marginal(self) -> pd.DataFrame:
        """Each key component against the whole query (column sums), largest in absolute value first."""
        return _marginal(self.key_components, self.matrix.sum(0))


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
