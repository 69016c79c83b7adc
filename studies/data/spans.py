"""Where each role of an item sits in the text a model reads, and the tokens its answers start with.

Character spans are computed on the texts of :mod:`studies.data.texts` and turned into token positions by the
tokenizer's offsets, so no position is counted by hand.
"""

from __future__ import annotations

from studies.data.forward import prepend_bos
from studies.data.items import AgreementItem, ResolutionItem
from studies.data.texts import question_prompt, sentence_end


def _span(offset: int | None, piece: str | None) -> tuple[int, int] | None:
    return None if offset is None or piece is None else (offset, offset + len(piece))


def resolution_spans(item: ResolutionItem, causal: bool) -> tuple[str, dict[str, tuple[int, int] | None]]:
    """The cached text of an item and the character spans of its roles and candidates in it (``None`` for
    a role the item lacks)."""
    s = item.sentence
    text = question_prompt(item).prefix + question_prompt(item).answers[0] if causal else s
    offsets = item.candidate_char_offsets or (None, None)
    spans = {
        "pronoun": (item.pronoun_char_offset, item.pronoun_end),
        "switch": _span(item.switch_char_offset, item.switch_word),
        "end": sentence_end(s),
        "candidate 0": _span(offsets[0], item.candidates[0]),
        "candidate 1": _span(offsets[1], item.candidates[1]),
    }
    if causal:
        prefix = question_prompt(item).prefix
        spans["final"] = (len(prefix) - 1, len(prefix))
        spans["answer 0"] = (len(prefix), len(text))
    return text, spans


def agreement_spans(item: AgreementItem) -> dict[str, tuple[int, int] | None]:
    a = item.antecedent_char_offset
    d = item.distractor_char_offset
    return {
        "final": (len(item.prompt) - 1, len(item.prompt)),
        "antecedent": (a, a + len(item.antecedent)),
        "distractor": None if d is None else (d, d + len(item.distractor)),
    }


def target_ids(model, item: AgreementItem, bos: bool | None = None) -> list[int]:
    """First token of each target pronoun as it follows the prompt."""
    ids = []
    for target in item.targets:
        tokens = model.tokenizer.to_tokens(item.prompt + target, prepend_bos=prepend_bos(model, bos))
        ids.append(
            int(tokens.ids[0, tokens.span_positions(len(item.prompt), len(item.prompt) + len(target))[0]])
        )
    if len(set(ids)) < len(ids):
        raise ValueError(
            f"item {item.id!r}: targets {item.targets} start with the same token; they cannot be told apart"
        )
    return ids
