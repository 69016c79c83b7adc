"""What the heads are scored on: random token sequences after the start token, and coreference sentences."""

from __future__ import annotations

import re

import torch

from studies.heads.config import HeadsConfig

# (sentence, pronoun, antecedent, other candidate); every word occurs once as a whole word.
COREFERENCE = (
    ("The trophy did not fit in the suitcase because it was too big.", "it", "trophy", "suitcase"),
    ("The animal didn't cross the street because it was too tired.", "it", "animal", "street"),
    ("The nurse thanked the patient after she finished her shift.", "she", "nurse", "patient"),
    ("The dog chased the ball until it was exhausted.", "it", "dog", "ball"),
    ("Mary called John because she needed advice.", "she", "Mary", "John"),
    ("John called Mary because he needed advice.", "he", "John", "Mary"),
    (
        "The city council refused the marchers a permit because they feared violence.",
        "they",
        "council",
        "marchers",
    ),
    ("The lawyer questioned the witness before he left the courtroom.", "he", "lawyer", "witness"),
    ("The bird left the nest when it was hungry.", "it", "bird", "nest"),
    ("The girl gave the boy a present because she liked him.", "she", "girl", "boy"),
    ("The boy gave the girl a present because he liked her.", "he", "boy", "girl"),
    ("The cat ignored the mouse because it was sleepy.", "it", "cat", "mouse"),
    ("The teacher praised the students because they had worked hard.", "they", "students", "teacher"),
    ("The farmer sold the horse after it grew old.", "it", "horse", "farmer"),
    ("The queen greeted the soldiers as they marched past.", "they", "soldiers", "queen"),
    ("Anna told Peter that she would arrive late.", "she", "Anna", "Peter"),
    ("The engineer fixed the machine after it broke down.", "it", "machine", "engineer"),
    ("The actors thanked the director because they admired his work.", "they", "actors", "director"),
    ("The chef tasted the soup and said it needed salt.", "it", "soup", "chef"),
    ("David met Sarah at the station, and he carried her bags.", "he", "David", "Sarah"),
)
SCHEMAS = tuple(range(5)) + (4,) + tuple(range(5, 9)) + (8,) + tuple(range(9, 18))
"""One schema per sentence of :data:`COREFERENCE`, except the mirrored pairs ("Mary called John" / "John
called Mary", "The girl gave the boy" / "The boy gave the girl"), which share one: they are held out together."""


def random_tokens(
    cfg: HeadsConfig, d_vocab: int, seed: int, *, repeat: bool, bos: int | None
) -> torch.Tensor:
    """Random ordinary token ids ``[batch, pos]``, repeated once if asked, after an optional BOS token."""
    gen = torch.Generator().manual_seed(seed + (1 if repeat else 2))
    high = min(cfg.token_high, d_vocab)
    low = min(cfg.token_low, high - 1)
    tokens = torch.randint(low, high, (cfg.batch, cfg.seq_len), generator=gen)
    if repeat:
        tokens = torch.cat([tokens, tokens], dim=1)
    if bos is not None:
        tokens = torch.cat([torch.full((cfg.batch, 1), bos), tokens], dim=1)
    return tokens


def word_positions(model, text: str, word: str) -> list[int]:
    """Token positions covering the only whole-word occurrence of ``word`` in ``text``."""
    matches = [m.span() for m in re.finditer(rf"\b{re.escape(word)}\b", text)]
    if len(matches) != 1:
        raise ValueError(f"{word!r} occurs {len(matches)} times as a word in {text!r}; expected exactly once")
    return model.tokenizer.char_span_to_token_positions(text, *matches[0])


def start_token(tokenizer) -> int | None:
    """The id the tokenizer starts a text with: its BOS, or the special token its post-processor prepends.

    BERT's tokenizer has no BOS id but starts every text with ``[CLS]``; putting that token first in the
    random sequences too makes the first-token (sink) score measure attention to the same kind of position
    in every model. ``None`` when texts start with an ordinary token (GPT-2).
    """
    if tokenizer.bos_id is not None:
        return tokenizer.bos_id
    encoded = tokenizer.to_tokens("a")
    return int(encoded.ids[0, 0]) if bool(encoded.special[0, 0]) else None
