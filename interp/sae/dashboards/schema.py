"""A feature file: one feature's dashboard in circuit-tracer's feature-file schema, as a value.

circuit-tracer 0.5's ``frontend/feature_models.py`` names the fields (its pydantic ``Model``): ``transcoder_id``,
``index`` (the feature's ``featureIndex``), ``examples_quantiles`` (groups, each a ``quantile_name`` and its
examples: the token texts ``tokens``, the feature's activation at each ``tokens_acts_list``, the chosen token
``train_token_ind`` and ``is_repeated_datapoint``), ``top_logits``, ``bottom_logits``, ``act_min``,
``act_max``, ``quantile_values``, ``histogram`` and ``activation_frequency``. interp's files add fields that
model ignores: ``layer``, ``feature``, ``quantile_bounds``, ``histogram_range``, ``n_active``, ``n_tokens``, and
on each example ``item``, ``position`` and ``activation``.

Every reader and writer of these files goes through :class:`FeatureFile`: :meth:`FeatureFile.to_json` writes
the fields in the order above (what ``interp dashboards`` has always written, byte for byte), leaving out any
that a file read from elsewhere did not have, and :meth:`FeatureFile.from_json` reads any file of the schema,
refusing one that is not in a single line that names the file and what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from interp.feature_id import FeatureId


class FeatureFileError(ValueError):
    """A file that cannot be read as a feature file (a bad file costs its own feature, not a whole run)."""


@dataclass(frozen=True, slots=True)
class Example:
    """One example: a window of tokens with the feature's activation at each, around the chosen token."""

    tokens: list[str]
    tokens_acts_list: list[float]
    train_token_ind: int = 0
    is_repeated_datapoint: bool = False
    item: int | None = None
    position: int | None = None
    activation: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tokens": self.tokens,
            "tokens_acts_list": self.tokens_acts_list,
            "train_token_ind": self.train_token_ind,
            "is_repeated_datapoint": self.is_repeated_datapoint,
        }
        for name in ("item", "position", "activation"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, row: Any, where: str) -> Example:
        """``where`` names the example in the error (``FILE: example 2 of quantile 0``)."""
        try:
            tokens = [str(t) for t in row["tokens"]]
            acts = [float(a) for a in row["tokens_acts_list"]]
            chosen = int(row.get("train_token_ind", 0))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise FeatureFileError(f"{where} is not tokens plus tokens_acts_list ({err})") from None
        if len(tokens) != len(acts):
            raise FeatureFileError(
                f"{where} has {len(tokens)} tokens but {len(acts)} activations; a feature file gives one per token"
            )
        return cls(
            tokens,
            acts,
            chosen,
            bool(row.get("is_repeated_datapoint", False)),
            row.get("item"),
            row.get("position"),
            row.get("activation"),
        )


@dataclass(frozen=True, slots=True)
class QuantileGroup:
    """A titled group of examples: the top activations, or one quantile of them."""

    quantile_name: str
    examples: list[Example]

    def to_dict(self) -> dict[str, Any]:
        return {"quantile_name": self.quantile_name, "examples": [e.to_dict() for e in self.examples]}


@dataclass(frozen=True)
class FeatureFile:
    """One feature's file (see the module docstring); fields a file read from elsewhere lacks are ``None``."""

    transcoder_id: str | None
    index: int | None
    examples_quantiles: list[QuantileGroup]
    top_logits: list[str] | None = None
    bottom_logits: list[str] | None = None
    act_min: float | None = None
    act_max: float | None = None
    quantile_values: list[float] | None = None
    histogram: list[float] | None = None
    activation_frequency: float | None = None
    layer: int | None = None
    feature: int | None = None
    quantile_bounds: list[float] | None = None
    histogram_range: list[float] | None = None
    n_active: int | None = None
    n_tokens: int | None = None

    ORDER = (
        "transcoder_id", "index", "layer", "feature", "examples_quantiles", "top_logits", "bottom_logits",
        "act_min", "act_max", "quantile_values", "quantile_bounds", "histogram", "histogram_range",
        "activation_frequency", "n_active", "n_tokens",
    )  # fmt: skip
    """The fields in the order a file holds them."""

    @property
    def id(self) -> FeatureId:
        """The feature: from ``layer`` and ``feature`` where the file gives them, else unpaired from ``index``."""
        if self.layer is not None and self.feature is not None:
            return FeatureId(self.layer, self.feature)
        if self.index is None:
            raise FeatureFileError("the feature file gives neither layer and feature nor index")
        return FeatureId.from_index(self.index)

    @property
    def examples(self) -> list[Example]:
        """Every example, group by group."""
        return [e for group in self.examples_quantiles for e in group.examples]

    def compact(self, top: int, per_group: int) -> FeatureFile:
        """The file with fewer examples (the first ``top`` of the first group, ``per_group`` of each other)
        and no percentiles: what a page embeds."""
        kept = [
            QuantileGroup(g.quantile_name, g.examples[: top if i == 0 else per_group])
            for i, g in enumerate(self.examples_quantiles)
        ]
        return replace(self, examples_quantiles=kept, quantile_values=[])

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object, fields in file order, those that are ``None`` left out."""
        out: dict[str, Any] = {}
        for name in self.ORDER:
            value = getattr(self, name)
            if name == "examples_quantiles":
                out[name] = [g.to_dict() for g in value]
            elif value is not None:
                out[name] = value
        return out

    def to_json(self) -> str:
        """The file's text: compact JSON, UTF-8 characters as they are, no NaN."""
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any, source: str = "the feature file") -> FeatureFile:
        """Read a feature file's object; ``source`` (its path) names it in errors.

        Raises:
            FeatureFileError: not an object with an ``examples_quantiles`` list of groups of examples, each
                example tokens plus as many activations, or a field of the wrong kind.
        """
        groups = data.get("examples_quantiles") if isinstance(data, dict) else None
        if not isinstance(groups, list):
            raise FeatureFileError(
                f"{source}: no 'examples_quantiles' list; not a circuit-tracer feature file"
            )
        quantiles = []
        for q, group in enumerate(groups):
            rows = group.get("examples") if isinstance(group, dict) else None
            if not isinstance(rows, list):
                raise FeatureFileError(
                    f"{source}: quantile {q} has no 'examples' list; not a circuit-tracer feature file"
                )
            name = str(group.get("quantile_name", ""))
            examples = [
                Example.from_dict(row, f"{source}: example {i} of quantile {q}") for i, row in enumerate(rows)
            ]
            quantiles.append(QuantileGroup(name, examples))
        fields: dict[str, Any] = {}
        for name in cls.ORDER:
            value = data.get(name)
            if name == "examples_quantiles" or value is None:
                continue
            if not _kind_ok(name, value):
                raise FeatureFileError(f"{source}: {name} is {json.dumps(value)[:60]}, not {_KINDS[name]}")
            fields[name] = value
        return cls(examples_quantiles=quantiles, **{"transcoder_id": None, "index": None, **fields})

    @classmethod
    def from_json(cls, text: str, source: str = "the feature file") -> FeatureFile:
        """Read a feature file's text (see :meth:`from_dict`)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise FeatureFileError(f"{source}: not a JSON feature file ({err})") from None
        return cls.from_dict(data, source)


_KINDS = {
    "transcoder_id": "a string",
    "index": "a whole number",
    "layer": "a whole number",
    "feature": "a whole number",
    "n_active": "a whole number",
    "n_tokens": "a whole number",
    "act_min": "a number",
    "act_max": "a number",
    "activation_frequency": "a number",
    "top_logits": "a list of strings",
    "bottom_logits": "a list of strings",
    "quantile_values": "a list of numbers",
    "quantile_bounds": "a list of numbers",
    "histogram": "a list of numbers",
    "histogram_range": "a list of numbers",
}


def _kind_ok(name: str, value: Any) -> bool:
    kind = _KINDS[name]
    if kind == "a string":
        return isinstance(value, str)
    if kind == "a whole number":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "a number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "a list of strings":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    )
