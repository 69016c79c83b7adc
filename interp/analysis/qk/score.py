"""Why a head attends where it does: an attention score split into query-component x key-component terms.

Kamath et al. (2025), "Tracing Attention Computation Through Feature Interactions", write an attention score
as a bilinear function of what the query and key streams are made of. Here the stream entering ``layer`` at
the query position and at the key position is split into its components (the one walk over the stream,
:func:`interp.analysis.decompose.decompose_stream`: embeddings, each earlier head's write by the key it read,
each MLP's write or each transcoder feature's, the biases), each component is pushed on its own through the
frozen norm, ``W_Q`` / ``W_K``, the frozen q/k norm and rotary at its position
(:mod:`interp.analysis.qk.project`), and ``matrix[i, j]`` is query part ``i`` dotted with key part ``j`` times
the layer's scale. Every step is linear once the norm scales are frozen at the run's values, so
``matrix.sum()`` is the score, exactly. Gemma 2 soft-caps scores after this sum (``cap * tanh(score / cap)``);
the capped value is reported beside it (:attr:`QKAttribution.capped`), as the cap is not linear.

All of it runs through interp's hooks and config fields: one forward caches the pattern, values, MLP outputs
and norm scales the split needs (:func:`qk_names`), and no family is special-cased.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from hooks import ActivationCache
from interp.analysis.checks import check_index, check_layer, require_hooks
from interp.analysis.decompose import Heads, decompose_names, decompose_stream
from interp.analysis.feature_writes import check_transcoders, feature_names
from interp.analysis.qk.matrix import QKScore
from interp.analysis.qk.project import project, projection_names
from interp.analysis.qk.prompt import Prompt, as_prompt
from interp.dictionary import SparseDictionary


@dataclass(frozen=True, kw_only=True)
class QKAttribution(QKScore):
    """One attention score of one head, split into query-component x key-component terms (the parts, each
    component's query or key vector, float32).

    Attributes:
        layer, head: the head (``head`` is the query head; under grouped-query attention the key side is
            its key/value head).
        query, key: the positions.
        score: the score before any soft-cap, ``q . k * scale``; equals ``matrix.sum()``.
        model_score: the value ``hook_attn_scores`` held in the run (after the soft-cap, where there is one).
        softcap: the layer's soft-cap, or ``None``.
        prompt: the tokens the score was computed on.
    """

    layer: int
    head: int
    query: int
    key: int
    score: float
    model_score: float
    softcap: float | None
    prompt: Prompt

    @property
    def capped(self) -> float:
        """The score after the soft-cap, ``cap * tanh(score / cap)`` (the score itself without one)."""
        if self.softcap is None:
            return self.score
        return self.softcap * math.tanh(self.score / self.softcap)

    def __repr__(self) -> str:
        tokens = self.prompt.tokens
        return (
            f"QKAttribution(L{self.layer}H{self.head}, query {self.query} {tokens[self.query]!r} -> key "
            f"{self.key} {tokens[self.key]!r}: score {self.score:.4g}, {len(self.query_components)} x "
            f"{len(self.key_components)} terms)"
        )


def qk_names(
    model: nn.Module, layer: int, *, by_source: bool = True, transcoders: SparseDictionary | None = None
) -> list[str]:
    """The hooks :func:`qk_attribution` reads, to pass as ``names_filter`` when making its ``cache``.

    >>> from interp import HookedTransformer, TransformerConfig
    >>> model = HookedTransformer(TransformerConfig(n_layers=2, d_model=8, n_heads=2, d_vocab=10, n_ctx=4))
    >>> qk_names(model, 1, by_source=False)  # doctest: +NORMALIZE_WHITESPACE
    ['hook_embed', 'hook_pos_embed', 'blocks.0.attn.hook_z', 'blocks.0.hook_mlp_out',
     'blocks.1.ln1.hook_scale', 'blocks.1.attn.hook_attn_scores']
    """
    layer = check_layer(model, layer)
    names = decompose_names(model, layer, heads=_heads(by_source))
    for side in ("q", "k"):
        names += [n for n in projection_names(model, layer, side) if n not in names]
    names.append(f"blocks.{layer}.attn.hook_attn_scores")
    if transcoders is not None:
        names += [n for n in feature_names(transcoders, layer) if n not in names]
    return names


def _heads(by_source: bool) -> Heads:
    """How the stream's split reads the heads' writes: by the key each read, or one part per head."""
    return "source" if by_source else "z"


@torch.no_grad()
def qk_attribution(
    model: nn.Module,
    tokens: Any,
    layer: int,
    head: int,
    query: int,
    key: int,
    *,
    transcoders: SparseDictionary | None = None,
    cache: ActivationCache | None = None,
    by_source: bool = True,
) -> QKAttribution:
    """Split head ``head`` of ``layer``'s score from ``query`` to ``key`` into component pairs.

    Args:
        model: a :class:`~interp.HookedTransformer`.
        tokens: one prompt: text (with the model's tokenizer), a :class:`~interp.tokens.Tokens` batch of one
            row (padding allowed), or token ids ``[pos]`` / ``[1, pos]``.
        layer, head: the head; ``head`` counts query heads.
        query, key: positions in the prompt (negatives count from the end).
        transcoders: a transcoder set for this model; each MLP it replaces is split into its active
            features' decoder writes, the decoder bias, the skip term and the error node.
        cache: a cache of this prompt holding :func:`qk_names`; without one, a forward pass makes it.
        by_source: split each earlier head's write by the key position it read (``L3H4@"tired"``); with
            ``False`` one component per head.

    Returns:
        A :class:`QKAttribution` whose ``matrix.sum()`` equals the pre-cap score.

    Raises:
        IndexError: the layer, head or a position is out of range.
        ValueError: the key comes after the query in a causal model, lies outside the layer's sliding window,
            or a position is padding; the transcoders belong to another model.
        MissingHooksError: ``cache`` lacks hooks (the message names them).
    """
    cfg = model.cfg
    layer = check_layer(model, layer)
    head = check_index(head, cfg.n_heads, "head", f"a layer with n_heads={cfg.n_heads}")
    prompt = as_prompt(model, tokens)
    query = prompt.check_position(query, "query")
    key = prompt.check_position(key, "key")
    prompt.check_visible(model, layer, query, key)
    if transcoders is not None:
        check_transcoders(model, transcoders)
    names = qk_names(model, layer, by_source=by_source, transcoders=transcoders)
    if cache is None:
        _, cache = model.run_with_cache(prompt.ids, prompt.mask, names_filter=names)
    else:
        fix = f"names_filter=qk_names(model, {layer}, by_source={by_source})"
        require_hooks(cache, names, f"qk_attribution(layer={layer})", fix)
    sides = []
    for side, pos in (("q", query), ("k", key)):
        components, parts = decompose_stream(
            model,
            cache,
            layer,
            position=pos,
            heads=_heads(by_source),
            transcoders=transcoders,
            tokens=prompt.tokens,
        )
        rotary = prompt.rotary(model, layer, pos)
        sides.append(project(model, cache, layer, head, pos, rotary, components, parts, side))
    (q_components, q_parts), (k_components, k_parts) = sides
    terms = dict(
        query_components=tuple(q_components),
        key_components=tuple(k_components),
        query_parts=q_parts.cpu(),
        key_parts=k_parts.cpu(),
        scale=model.blocks[layer].attn.scale,
    )
    observed = cache[f"blocks.{layer}.attn.hook_attn_scores"][0, head, query, key]
    return QKAttribution(
        **terms,
        layer=layer,
        head=head,
        query=query,
        key=key,
        score=QKScore(**terms).total,
        model_score=float(observed),
        softcap=model.blocks[layer].attn.softcap,
        prompt=prompt,
    )
