"""A component of a stream in QK attribution: what wrote it and where, and the label people read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal[
    "embed", "pos_embed", "head", "attn_bias", "mlp", "feature", "error", "tc_bias", "skip", "bias"
]


@dataclass(frozen=True)
class Component:
    """One part of a stream, identified by what wrote it and where.

    Attributes:
        kind: ``embed``, ``pos_embed``, ``head``, ``attn_bias`` (a layer's ``b_O``), ``mlp``, ``feature``,
            ``error`` (a transcoder's error node), ``tc_bias`` (its decoder bias), ``skip`` (its skip term) or
            ``bias`` (a norm's bias, or the projection's ``b_Q`` / ``b_K``, named by ``name``).
        position: the position written (the query or key position), ``None`` for biases.
        layer: the writing layer (for a feature: the layer that reads it).
        head: the writing head.
        source: for a head split by source, the key position it read.
        feature: the feature index.
        name: the bias's name (``ln1.b``, ``b_Q``, ``L2 ln1.b``...).
        token: the token the label shows (the source token of a head, else the token at ``position``).

    >>> str(Component("head", 8, 3, 4, source=11, token=" tired")), str(Component("mlp", 8, 7, token=" it"))
    ('L3H4@" tired"', 'MLP7@" it"')
    """

    kind: Kind
    position: int | None = None
    layer: int | None = None
    head: int | None = None
    source: int | None = None
    feature: int | None = None
    name: str = ""
    token: str = field(default="", compare=False)

    def __str__(self) -> str:
        at = f"@{self.token!r}".replace("'", '"') if self.token else ""
        if self.kind == "embed":
            return f"embed{at}"
        if self.kind == "pos_embed":
            return f"pos{at}"
        if self.kind == "head":
            return f"L{self.layer}H{self.head}{at}"
        if self.kind == "attn_bias":
            return f"L{self.layer} b_O"
        if self.kind == "mlp":
            return f"MLP{self.layer}{at}"
        if self.kind == "feature":
            return f"feature {self.layer}/{self.feature}{at}"
        if self.kind == "error":
            return f"MLP{self.layer} error{at}"
        if self.kind == "tc_bias":
            return f"MLP{self.layer} b_dec"
        if self.kind == "skip":
            return f"MLP{self.layer} skip{at}"
        return self.name
