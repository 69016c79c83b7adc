"""The twin pairs the seed's question is asked on: the WSC273 pairs, the one-person agreement pairs and the seed's
own, each twin's preference, and the pair's switch sensitivity.

A twin pair is two prompts that differ in the switch word (WSC273, the seed's) or the name (agreement) and
expect different answers of one target ``a - b``. Its *switch sensitivity* is the signed twin difference of the
preference: the target in the twin whose expected answer is ``a`` minus the target in the twin whose expected
answer is ``b``. It is positive when the switch word moves the model toward the expected referent, whatever the
model's *bias* (the mean of the two preferences: how much it prefers ``a`` anyway). The model is *sensitive* to
a pair when its sensitivity is positive; "right in both twins" is a stricter and different thing (a model that
always prefers one noun is right in no pair however much the switch word moves it).

A pair's ``shared`` positions are the tokens both twins have at the start; the model is causal, so every
activation there is the same in both twins, and nothing there can be what differs between them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from studies.attribution.interventions import target_value
from studies.attribution.prompts import (
    Prompt,
    agreement_prompts,
    seed_prompts,
    shared_prefix,
    winograd_prompts,
)

DATA = ("winograd", "agreement")


@dataclass(frozen=True)
class TwinPair:
    """Two twins of one target, the one expecting its first token first.

    Attributes:
        data: ``winograd`` (WSC273 and the seed's pair) or ``agreement``.
        first, second: the twin whose expected answer is the target's first token (``sign`` +1), and its twin.
        candidates: the roles of the candidates' words in both prompts: ``("a", "b")`` or ``("name",)``.
        preference: the target ``a - b`` in each twin, once measured.
    """

    data: str
    first: Prompt
    second: Prompt
    candidates: tuple[str, ...]
    preference: tuple[float, float] = field(default=(math.nan, math.nan))

    @property
    def schema_id(self) -> str:
        return self.first.schema

    @property
    def id(self) -> str:  # with schema_id, what a split by schema reads
        return self.first.schema

    @property
    def prompts(self) -> tuple[Prompt, Prompt]:
        return self.first, self.second

    @property
    def shared(self) -> int:
        """How many leading tokens both twins share."""
        return shared_prefix(self.first.tokens, self.second.tokens)

    @property
    def sensitivity(self) -> float:
        return switch_sensitivity(*self.preference)

    @property
    def bias(self) -> float:
        return (self.preference[0] + self.preference[1]) / 2


def switch_sensitivity(expecting_a: float, expecting_b: float) -> float:
    """The signed twin difference of the preference ``a - b``: its value in the twin expecting ``a`` minus
    its value in the twin expecting ``b`` (positive: the switch moves the model toward the expected referent)."""
    return expecting_a - expecting_b


def build(model: Any, data: str, items: list) -> tuple[list[TwinPair], dict[str, list[str]]]:
    """The usable twin pairs of ``data`` and the schemas left out, by reason. Winograd: the WSC273 pairs
    (:func:`~studies.attribution.prompts.winograd_prompts`) and the seed's pair (schema ``seed``); agreement:
    the one-person she/he pairs."""
    if data == "winograd":
        found, left = winograd_prompts(model, items)
        pairs = [TwinPair(data, a, b, ("a", "b")) for a, b in found]
        tired, wide = (
            replace(p, roles={**p.roles, "a": p.roles["animal"], "b": p.roles["street"]})
            for p in seed_prompts(model)
        )
        return [TwinPair(data, tired, wide, ("a", "b")), *pairs], left
    if data != "agreement":
        raise ValueError(f"data {data!r}: choose from {', '.join(DATA)}")
    prompts = agreement_prompts(model, items, len(items))
    pairs = []
    for x, y in zip(prompts[::2], prompts[1::2], strict=True):
        first, second = (x, y) if x.sign > 0 else (y, x)
        pairs.append(TwinPair(data, first, second, ("name",)))
    return pairs, {}


@torch.no_grad()
def measured(model: Any, pairs: list[TwinPair]) -> list[TwinPair]:
    """The pairs with each twin's preference ``a - b`` at the last position (the model's own forward)."""
    out = []
    for pair in pairs:
        values = []
        for prompt in pair.prompts:
            logits = model(prompt.tokens[None].to(model.embed.W_E.device))[0]  # [pos, d_vocab]
            values.append(target_value(model, logits, prompt))
        out.append(replace(pair, preference=(values[0], values[1])))
    return out


def sensitive(pairs: list[TwinPair], limit: int) -> list[TwinPair]:
    """The pairs with positive switch sensitivity, the ``limit`` most sensitive (ties: file order)."""
    kept = [p for p in pairs if p.sensitivity > 0]
    order = sorted(range(len(kept)), key=lambda i: (-kept[i].sensitivity, i))
    return [kept[i] for i in order[:limit]]
