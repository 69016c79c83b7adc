"""FeatureId: a feature of a sparse dictionary by its layer and its index in that layer, and its one number.

circuit-tracer numbers a feature ``featureIndex``, the Cantor pairing of layer and feature,
``(l + f)(l + f + 1)/2 + f``: its graph files write it into each feature node's ``feature`` and its feature
files are named by it (``features/SCAN/<featureIndex>.json``). Graphs, dashboards and explanations all meet on
that number, so it is computed here and nowhere else, and ``"3:17"`` (how people write a feature) is parsed here
too. It sits beside :mod:`interp.dictionary`, below every package that names features.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

_TEXT = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*")


def feature_index(layer: Any, feature: Any) -> Any:
    """The Cantor pairing ``(l + f)(l + f + 1)/2 + f`` of whole numbers, or elementwise of integer tensors (the
    dashboards' pass numbers many features at once); :attr:`FeatureId.index` for one feature.

    >>> feature_index(3, 17)
    227
    """
    total = layer + feature
    return total * (total + 1) // 2 + feature


@dataclass(frozen=True, order=True)
class FeatureId:
    """A feature: its layer and its index within the layer.

    >>> FeatureId.parse("3:17"), str(FeatureId(3, 17)), FeatureId(3, 17).index
    (FeatureId(layer=3, feature=17), '3:17', 227)
    >>> FeatureId.from_index(227)
    FeatureId(layer=3, feature=17)
    """

    layer: int
    feature: int

    def __post_init__(self) -> None:
        if self.layer < 0 or self.feature < 0:
            raise ValueError(
                f"feature {self.layer}:{self.feature}: layer and feature are whole numbers from 0"
            )

    @property
    def index(self) -> int:
        """circuit-tracer's ``featureIndex``: the Cantor pairing of layer and feature."""
        return feature_index(self.layer, self.feature)

    @classmethod
    def from_index(cls, index: int) -> FeatureId:
        """The feature that :attr:`index` numbers ``index`` (the inverse of the Cantor pairing)."""
        if index < 0:
            raise ValueError(f"featureIndex {index} is negative; feature indices are 0 or more")
        total = (math.isqrt(8 * index + 1) - 1) // 2
        feature = index - total * (total + 1) // 2
        return cls(total - feature, feature)

    @classmethod
    def parse(cls, text: str, flag: str = "feature") -> FeatureId:
        """``"L:F"`` (layer and feature, both whole numbers from 0); ``flag`` names where it came from in the
        error (``--features``)."""
        match = _TEXT.fullmatch(text)
        if match is None:
            raise ValueError(f"{flag} {text.strip()!r} is not LAYER:FEATURE; write it as 3:17")
        return cls(int(match[1]), int(match[2]))

    @classmethod
    def parse_list(cls, text: str, flag: str = "--features") -> list[FeatureId]:
        """``"3:17,5:2"`` as features, in the order given (each checked as :meth:`parse` checks it)."""
        parts = [part for part in text.split(",") if part.strip()]
        if not parts:
            raise ValueError(f"{flag} {text!r} names no feature; give LAYER:FEATURE pairs such as 3:17,5:2")
        return [cls.parse(part, flag) for part in parts]

    def __str__(self) -> str:
        return f"{self.layer}:{self.feature}"
