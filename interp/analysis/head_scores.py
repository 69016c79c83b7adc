"""Scores that flag familiar kinds of attention head, one number per ``[layer, head]``.

Each score is the attention mass a head puts, on average over the queries where the score is defined, on the
keys a pattern names: the previous token (previous-token heads), an earlier copy of the current token
(duplicate-token heads), the token right after an earlier copy of the current token (induction heads, Olsson
et al. 2022), or the first real token (attention sinks). The definitions read the token ids, so they hold on
any input; :func:`repeated_tokens` makes the usual probe for induction (a random sequence, then itself again).
Padding is excluded on both sides when an attention mask is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import check_indices, require_hooks
from interp.analysis.source_contributions import attention_norms


def repeated_tokens(
    d_vocab: int, seq_len: int, batch: int = 8, *, seed: int = 0, bos: int | None = None
) -> torch.Tensor:
    """Random tokens repeated once: ``[batch, 2 * seq_len]`` (``+ 1`` with a ``bos`` token first).

    >>> repeated_tokens(50, 3, batch=1, seed=0).shape
    torch.Size([1, 6])
    """
    generator = torch.Generator().manual_seed(seed)
    first = torch.randint(0, d_vocab, (batch, seq_len), generator=generator)
    tokens = torch.cat([first, first], dim=1)
    if bos is not None:
        tokens = torch.cat([torch.full((batch, 1), bos), tokens], dim=1)
    return tokens


def pattern_names(model: nn.Module) -> list[str]:
    return [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.cfg.n_layers)]


def _patterns(
    model: nn.Module, tokens: torch.Tensor, attention_mask: torch.Tensor | None, cache: ActivationCache | None
) -> torch.Tensor:
    """``[layer, batch, head, query, key]``, from ``cache`` or a fresh run."""
    names = pattern_names(model)
    if cache is None:
        with torch.no_grad():
            cache = model.run_with_cache(tokens, attention_mask, names_filter=names)[1]
    require_hooks(cache, names, "head scores", "names_filter='blocks.*.attn.hook_pattern'")
    return torch.stack([cache[n].float() for n in names])


def _valid(tokens: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    if attention_mask is None:
        return torch.ones(tokens.shape, dtype=torch.bool)
    return attention_mask.reshape(tokens.shape).bool().cpu()


def _score(patterns: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over queries with a target of the mass on the targets: ``[layer, head]``.

    ``targets [batch, query, key]`` is True on the keys that count for each query.
    """
    has_target = targets.any(-1)  # [batch, query]
    if not has_target.any():
        raise ValueError(
            "no query in these tokens has a key the score is defined on (e.g. no repeated token)"
        )
    targets = targets.to(patterns.device, patterns.dtype)
    mass = torch.einsum("lbhqk,bqk->lbhq", patterns, targets)  # [layer, batch, head, query]
    return (mass * has_target.to(mass)[None, :, None]).sum((1, 3)) / has_target.sum()


def _tokens(tokens: torch.Tensor) -> torch.Tensor:
    return (tokens[None] if tokens.ndim == 1 else tokens).cpu()


Targets = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``(tokens [batch, pos], valid [batch, pos]) -> [batch, query, key]``: the keys a score counts per query."""


def _relation_score(
    model: nn.Module,
    tokens: torch.Tensor,
    attention_mask: torch.Tensor | None,
    cache: ActivationCache | None,
    targets: Targets,
) -> torch.Tensor:
    """The mass every head puts on the keys ``targets`` names, with padding left out on both sides."""
    tokens = _tokens(tokens)
    valid = _valid(tokens, attention_mask)
    keys = targets(tokens, valid) & valid[:, :, None] & valid[:, None, :]  # [batch, query, key]
    return _score(_patterns(model, tokens, attention_mask, cache), keys)


def _previous(tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    n = tokens.shape[1]
    below = torch.ones(n, n, dtype=torch.bool)
    return (below.tril(-1) & ~below.tril(-2))[None]  # key == query - 1


def _duplicate(tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    n = tokens.shape[1]
    same = tokens[:, :, None] == tokens[:, None, :]  # [batch, query, key]
    return same & torch.ones(n, n, dtype=torch.bool).tril(-1)  # an earlier key with the query's token


def _induction(tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    # key k counts for query q when the real token before k equals the token at q, and k - 1 < q
    n = tokens.shape[1]
    before = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)  # [batch, key]
    valid_before = torch.cat([torch.zeros_like(valid[:, :1]), valid[:, :-1]], dim=1)
    follows = tokens[:, :, None] == before[:, None, :]  # [batch, query, key]
    return follows & torch.ones(n, n, dtype=torch.bool).tril() & valid_before[:, None, :]


def _first(tokens: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    first = valid.long().argmax(1)  # [batch]: index of the first real token
    is_first = torch.arange(tokens.shape[1])[None] == first[:, None]  # [batch, key]
    return is_first[:, None, :] & ~is_first[:, :, None]  # later queries to the first key


def previous_token_scores(
    model: nn.Module,
    tokens: torch.Tensor,
    *,
    attention_mask: torch.Tensor | None = None,
    cache: ActivationCache | None = None,
) -> torch.Tensor:
    """Mass on the immediately preceding real token: ``[n_layers, n_heads]``."""
    return _relation_score(model, tokens, attention_mask, cache, _previous)


def duplicate_token_scores(
    model: nn.Module,
    tokens: torch.Tensor,
    *,
    attention_mask: torch.Tensor | None = None,
    cache: ActivationCache | None = None,
) -> torch.Tensor:
    """Mass on earlier occurrences of the query's own token: ``[n_layers, n_heads]``."""
    return _relation_score(model, tokens, attention_mask, cache, _duplicate)


def induction_scores(
    model: nn.Module,
    tokens: torch.Tensor | None = None,
    *,
    attention_mask: torch.Tensor | None = None,
    cache: ActivationCache | None = None,
    seq_len: int = 20,
    batch: int = 8,
    seed: int = 0,
) -> torch.Tensor:
    """Mass on tokens that followed an earlier occurrence of the query's token: ``[n_layers, n_heads]``.

    Without ``tokens``, runs :func:`repeated_tokens` ``(d_vocab, seq_len, batch, seed=seed)``.
    """
    if tokens is None:
        tokens = repeated_tokens(model.cfg.d_vocab, seq_len, batch, seed=seed)
    return _relation_score(model, tokens, attention_mask, cache, _induction)


def first_token_scores(
    model: nn.Module,
    tokens: torch.Tensor,
    *,
    attention_mask: torch.Tensor | None = None,
    cache: ActivationCache | None = None,
) -> torch.Tensor:
    """Mass on the first real token (the attention sink), over later queries: ``[n_layers, n_heads]``."""
    return _relation_score(model, tokens, attention_mask, cache, _first)


def _span(spec, batch: int, n_pos: int, what: str) -> torch.Tensor:
    """A ``[batch, pos]`` boolean mask from an index, a list/range of indices, or a boolean mask."""
    if isinstance(spec, torch.Tensor) and spec.dtype == torch.bool:
        if tuple(spec.shape) != (batch, n_pos):
            raise ValueError(
                f"{what} mask has shape {tuple(spec.shape)}; expected [batch, pos] = {(batch, n_pos)}"
            )
        mask = spec.cpu()
    else:
        if isinstance(spec, slice):
            spec = range(n_pos)[spec]
        mask = torch.zeros(batch, n_pos, dtype=torch.bool)
        mask[:, check_indices(spec, n_pos, what, f"a sequence of {n_pos} tokens")] = True
    empty = (~mask.any(1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"{what} selects no position in batch rows {empty[:10]}; every row needs at least one"
        )
    return mask


def _span_stack(spec: torch.Tensor, batch: int, n_pos: int, what: str) -> torch.Tensor:
    """A ``[n_span, batch, pos]`` boolean stack (rows without a position are allowed: they give NaN)."""
    if tuple(spec.shape[1:]) != (batch, n_pos):
        raise ValueError(
            f"{what} stack has shape {tuple(spec.shape)}; expected [n_span, batch, pos] = "
            f"[n_span, {batch}, {n_pos}]"
        )
    return spec.cpu()


def span_attention(
    model: nn.Module,
    cache: ActivationCache,
    query_positions: int | Sequence[int] | slice | torch.Tensor,
    key_positions: int | Sequence[int] | slice | torch.Tensor,
    by: str = "weight",
    *,
    reduce: str = "mean",
) -> torch.Tensor:
    """Attention from one span of tokens to another, per head.

    For each query in the query span, the share of its attention that lands in the key span (``by="weight"``:
    the summed pattern; ``by="norm"``: the summed :func:`attention_norms` over their total, Kobayashi et al.
    2020), averaged over the query span.

    Several spans at once: give ``[n_span, batch, pos]`` boolean stacks for both ``query_positions`` and
    ``key_positions``; the patterns (or norms) are then read once for every pair of spans, and a row where a
    span selects no position gives NaN instead of an error.

    Args:
        cache: holds every layer's ``attn.hook_pattern`` (and ``attn.hook_v`` for ``by="norm"``).
        query_positions, key_positions: an index, a list/range/slice of indices shared by all rows, a
            ``[batch, pos]`` boolean mask for spans that differ per row, or (both) ``[n_span, batch, pos]``
            stacks of such masks.
        reduce: ``"mean"`` over the batch -> ``[n_layers, n_heads]``; ``"none"`` keeps it:
            ``[batch, n_layers, n_heads]``. With stacks: ``[n_query_span, n_key_span, n_layers, n_heads]``
            (the mean skips NaN rows) and ``[batch, n_query_span, n_key_span, n_layers, n_heads]``.
    """
    if by not in ("weight", "norm"):
        raise ValueError(f"by={by!r}; expected 'weight' or 'norm'")
    if reduce not in ("mean", "none"):
        raise ValueError(f"reduce={reduce!r}; expected 'mean' or 'none'")
    stacked = [isinstance(s, torch.Tensor) and s.dtype == torch.bool and s.ndim == 3
               for s in (query_positions, key_positions)]  # fmt: skip
    if any(stacked) and not all(stacked):
        raise ValueError(
            "give both query_positions and key_positions as [n_span, batch, pos] stacks, or neither"
        )
    names = pattern_names(model)
    if by == "norm":
        names += [f"blocks.{layer}.attn.hook_v" for layer in range(model.cfg.n_layers)]
    require_hooks(cache, names, f"span_attention(by={by!r})", f"names_filter={names}")
    if by == "weight":
        weights = torch.stack([cache[n].float() for n in pattern_names(model)])  # [layer, batch, head, q, k]
    else:
        norms = torch.stack([attention_norms(model, cache, layer) for layer in range(model.cfg.n_layers)])
        weights = norms / norms.sum(-1, keepdim=True).clamp(min=1e-30)  # [layer, batch, head, q, k]
    batch, n_pos = weights.shape[1], weights.shape[-1]
    if all(stacked):
        queries = _span_stack(query_positions, batch, n_pos, "query_positions")
        keys = _span_stack(key_positions, batch, n_pos, "key_positions")
    else:  # one span each, every row checked to select a position: a stack of one, without NaN rows
        queries = _span(query_positions, batch, n_pos, "query_positions")[None]
        keys = _span(key_positions, batch, n_pos, "key_positions")[None]
    per_span = _span_mass(weights, queries.to(weights), keys.to(weights))
    if not all(stacked):
        per_row = per_span[:, 0, 0]  # [batch, layer, head]
        return per_row.mean(0) if reduce == "mean" else per_row
    return per_span.nanmean(0) if reduce == "mean" else per_span


def _span_mass(weights: torch.Tensor, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Mean over each query span of the weight it puts on each key span: ``[batch, q span, k span, l, h]``.

    Args:
        weights: ``[layer, batch, head, query, key]``.
        queries, keys: ``[n_span, batch, pos]`` masks as floats; a row where a span is empty gives NaN.
    """
    mass = torch.einsum("lbhqk,mbk->lbhqm", weights, keys)  # [layer, batch, head, query, key span]
    summed = torch.einsum("lbhqm,nbq->bnmlh", mass, queries)  # [batch, query span, key span, layer, head]
    count = queries.sum(-1).T[:, :, None, None, None]  # [batch, query span, 1, 1, 1]
    empty = (count == 0) | (keys.sum(-1).T[:, None, :, None, None] == 0)
    return torch.where(empty, torch.nan, summed / count.clamp(min=1))


def head_table(scores: torch.Tensor, name: str = "score") -> pd.DataFrame:
    """A ``[n_layers, n_heads]`` score as a long table ``layer, head, <name>``, highest first."""
    layers, heads = torch.meshgrid(
        torch.arange(scores.shape[0]), torch.arange(scores.shape[1]), indexing="ij"
    )
    frame = pd.DataFrame(
        {
            "layer": layers.flatten().tolist(),
            "head": heads.flatten().tolist(),
            name: scores.flatten().tolist(),
        }
    )
    return frame.sort_values(name, ascending=False, ignore_index=True)
