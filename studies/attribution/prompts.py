"""The prompts the study draws graphs for: agreement twins, the seed's Winograd pair and the WSC273 twins, each
with its target (a logit difference ``a - b`` at the last position) and the token positions of the words that
matter."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from interp.circuits.features.targets import token_id
from interp.tokens import find_span
from studies.data.forward import prepend_bos
from studies.data.load import AgreementItem, ResolutionItem, twin_pairs
from studies.data.texts import DETERMINERS, question_prompt

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
        roles: role -> token positions (``name``, ``animal``, ``street``, ``it``, ``last``; for a WSC273 twin
            ``a`` and ``b``, the two candidates' nouns, and ``pronoun``).
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


def shared_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many leading tokens ``a`` and ``b`` share (a causal model's activations there are the same)."""
    x, y = a.tolist(), b.tolist()
    return next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))


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


def winograd_prompts(model, items: list) -> tuple[list[tuple[Prompt, Prompt]], dict[str, list[str]]]:
    """The WSC273 twin pairs as graph prompts: each sentence followed by the coreference study's question
    (`` In this sentence, "it" refers to the``, :func:`~studies.data.texts.question_prompt`), the target the
    first candidate's answer token minus the second's, roles ``a`` and ``b`` at the candidates' nouns.

    Returns the pairs, each ``(the twin whose answer is the first candidate, its twin)``, and the schemas left
    out by reason: ``multi-token answer`` (a graph's target is one token), ``same answer token``, ``other
    candidates`` (the twins' candidates or pronoun differ, so the target would mean two things), ``same answer``.
    """
    pairs, left = [], {}
    for x, y in twin_pairs(items):
        if not all(isinstance(i, ResolutionItem) for i in (x, y)):
            continue
        why = _unusable(model, x, y)
        if why is not None:
            left.setdefault(why, []).append(x.schema_id or x.id)
            continue
        first, second = (x, y) if x.answer == 0 else (y, x)
        pairs.append((_winograd_prompt(model, first), _winograd_prompt(model, second)))
    return pairs, left


def _unusable(model, x: ResolutionItem, y: ResolutionItem) -> str | None:
    if x.candidates != y.candidates or x.pronoun != y.pronoun or x.candidate_char_offsets is None:
        return "other candidates"
    if x.answer == y.answer:
        return "same answer"
    answers = question_prompt(x).answers
    ids = [model.tokenizer.to_tokens(a, prepend_bos=False).ids[0].tolist() for a in answers]
    if any(len(i) != 1 for i in ids):
        return "multi-token answer"
    return "same answer token" if ids[0] == ids[1] else None


def _winograd_prompt(model, item: ResolutionItem) -> Prompt:
    question = question_prompt(item)
    tokens, ids = _tokens(model, question.prefix)
    roles = {
        role: _span(tokens, question.prefix, *_noun(candidate, offset))
        for role, candidate, offset in zip("ab", item.candidates, item.candidate_char_offsets, strict=True)
    }
    roles["pronoun"] = _span(tokens, question.prefix, item.pronoun_char_offset, item.pronoun)
    if item.switch_char_offset is not None and item.switch_word:
        roles["switch"] = _span(tokens, question.prefix, item.switch_char_offset, item.switch_word)
    roles["last"] = [len(ids) - 1]
    target = tuple(question.answers)
    for t in target:
        token_id(model, t)  # one token each (checked when the pair was chosen)
    sign = 1 if item.answer == 0 else -1
    return Prompt(item.id, item.schema_id or item.id, question.prefix, ids, target, sign, roles)  # type: ignore[arg-type]


def _noun(candidate: str, offset: int) -> tuple[int, str]:
    """The candidate without a leading determiner (``The truck`` -> ``truck``) and where that starts."""
    first, _, rest = candidate.partition(" ")
    if rest and (first in DETERMINERS or first.capitalize() in DETERMINERS):
        return offset + len(first) + 1, rest
    return offset, candidate
