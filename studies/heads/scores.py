"""Every score of every head: the ``interp.analysis`` head scores, a positional score and a coreference score."""

from __future__ import annotations

import torch

from studies.heads.config import HeadsConfig
from studies.heads.inputs import COREFERENCE, random_tokens, start_token, word_positions
from studies.threads import single_thread


@torch.no_grad()
def patterns(model, tokens: torch.Tensor) -> tuple[torch.Tensor, object]:
    """``([layer, batch, head, query, key], cache)`` for token ids."""
    _, cache = model.run_with_cache(tokens.to(model.device), names_filter="blocks.*.attn.hook_pattern")
    return torch.stack([cache["pattern", layer].float().cpu() for layer in range(model.cfg.n_layers)]), cache


def positional_score(pattern: torch.Tensor) -> torch.Tensor:
    """1 - mean total variation between each row and the mean row at its position: ``[layer, head]``.

    Args:
        pattern: ``[layer, batch, head, query, key]`` on different random sequences of one length. Query 0
            (a one-key row in causal models) is left out.
    """
    mean = pattern.mean(1, keepdim=True)  # [layer, 1, head, query, key]
    tv = 0.5 * (pattern - mean).abs().sum(-1)  # [layer, batch, head, query]
    return 1 - tv[..., 1:].mean((1, 3))


@torch.no_grad()
def coreference_scores(model, items=COREFERENCE) -> torch.Tensor:
    """Attention from the pronoun to the antecedent minus to the other noun, ``[item, layer, head]``.

    The pronoun's first token is the query; each noun's mass is summed over its tokens. In a causal model both
    nouns precede the pronoun in every sentence here; the pronoun attends to neither when they follow it.
    """
    out = []
    for text, pronoun, antecedent, other in items:
        ids = model.tokenizer.to_tokens(text).ids
        pattern, _ = patterns(model, ids)  # [layer, 1, head, query, key]
        q = word_positions(model, text, pronoun)[0]
        mass = [pattern[:, 0, :, q, word_positions(model, text, w)].sum(-1) for w in (antecedent, other)]
        out.append(mass[0] - mass[1])  # [layer, head]
    return torch.stack(out)


@single_thread()
def score_heads(model, cfg: HeadsConfig, seed: int, *, coreference: bool = True) -> dict[str, torch.Tensor]:
    """Every score for every head, ``{name: [n_layers, n_heads]}`` (plus ``coreference_items``)."""
    from interp.analysis import (
        duplicate_token_scores,
        first_token_scores,
        induction_scores,
        previous_token_scores,
    )

    bos = start_token(model.tokenizer) if model.tokenizer is not None else None
    rep = random_tokens(cfg, model.cfg.d_vocab, seed, repeat=True, bos=bos)
    _, cache = patterns(model, rep)
    scores = {
        "previous_token": previous_token_scores(model, rep, cache=cache),
        "duplicate_token": duplicate_token_scores(model, rep, cache=cache),
        "induction": induction_scores(model, rep, cache=cache),
        "first_token": first_token_scores(model, rep, cache=cache),
    }
    plain, _ = patterns(model, random_tokens(cfg, model.cfg.d_vocab, seed, repeat=False, bos=bos))
    scores["positional"] = positional_score(plain)
    if coreference:
        items = coreference_scores(model)  # [item, layer, head]
        scores["coreference"] = items.mean(0)
        scores["coreference_items"] = items
    return {k: v.float().cpu() for k, v in scores.items()}
