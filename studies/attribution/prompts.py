"""The prompts the study draws graphs for: agreement twins and the seed's Winograd pair, each with its target
(a logit difference ``a - b`` at the last position) and the token positions of the words that matter."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from interp.tokens import find_span
from studies.data.forward import prepend_bos
from studies.data.load import AgreementItem, twin_pairs

SEED = (
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
)
SEED_QUESTION = ' In that sentence, "it" means the'
SEED_TARGET = (" animal", " street")
AGREEMENT_TARGET = (" she", " he")


@dataclass(frozen=True)
class Prompt:
    """One graph's input.

    Attributes:
        name: the item id (``ag-001a``) or ``seed-tired`` / ``seed-wide``.
        schema: what the prompt's twin shares with it (its schema id; ``seed`` for the seed's pair).
        text: the prompt.
        tokens: ``[pos]`` ids, a special token first.
        target: ``(a, b)``: the graph explains the logit difference ``a - b`` at the last position.
        sign: +1 when the expected answer is ``a``, -1 when it is ``b``.
        roles: role -> token positions (``name``, ``animal``, ``street``, ``it``, ``last``).
    """

    name: str
    schema: str
    text: str
    tokens: torch.Tensor
    target: tuple[str, str]
    sign: int
    roles: dict[str, list[int]]


def _tokens(model, text: str):
    tokens = model.to_tokens(text, prepend_bos=prepend_bos(model) or True)
    return tokens, tokens.ids[0].cpu()


def _span(tokens, text: str, start: int, piece: str) -> list[int]:
    return tokens.span_positions(start, start + len(piece), 0)


def agreement_prompts(model, items: list, n_pairs: int) -> list[Prompt]:
    """Both twins of the first ``n_pairs`` one-person she/he twin pairs (``2 * n_pairs`` prompts)."""
    out: list[Prompt] = []
    for a, b in twin_pairs(items):
        if len(out) >= 2 * n_pairs:
            break
        if not all(isinstance(x, AgreementItem) and x.distractor is None for x in (a, b)):
            continue
        if set(a.targets) != set(AGREEMENT_TARGET):
            continue
        for item in (a, b):
            tokens, ids = _tokens(model, item.prompt)
            answer = item.targets[item.answer]
            roles = {
                "name": _span(tokens, item.prompt, item.antecedent_char_offset, item.antecedent),
                "last": [len(ids) - 1],
            }
            sign = 1 if answer == AGREEMENT_TARGET[0] else -1
            out.append(Prompt(item.id, item.schema_id, item.prompt, ids, AGREEMENT_TARGET, sign, roles))
    return out


def seed_prompts(model) -> list[Prompt]:
    """The seed's pair with a question after it; the expected answer is the animal (tired), the street (wide)."""
    out = []
    for text, name, sign in ((SEED[0], "seed-tired", 1), (SEED[1], "seed-wide", -1)):
        prompt = text + SEED_QUESTION
        tokens, ids = _tokens(model, prompt)
        roles = {
            role: _span(tokens, prompt, find_span(prompt, piece)[0], piece)
            for role, piece in (("animal", "animal"), ("street", "street"), ("it", "it"))
        }
        switch = "tired" if sign == 1 else "wide"
        roles["switch"] = _span(tokens, prompt, find_span(prompt, switch)[0], switch)
        roles["last"] = [len(ids) - 1]
        out.append(Prompt(name, "seed", prompt, ids, SEED_TARGET, sign, roles))
    return out
