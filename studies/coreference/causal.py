"""Causal evidence: patch activations between twins and measure how much of the twin difference comes back.

Twins are natural counterfactuals: they differ only in the switch word (resolution) or the antecedent
(agreement). Each pair is run as a batch of two, clean ``[A, B]`` and corrupt ``[B, A]``, so one patch
measures both directions. The metric is the logit difference between the two answers at the prediction
position (the question prompt's last token for resolution, the next-pronoun position for agreement), signed
so that the clean row's answer is positive. An encoder has no logits; its metric is the projection of the
final stream at the pronoun (resolution) or the last token (agreement) onto the clean-minus-corrupt
difference there, scaled so that clean is 1 and corrupt 0.

Recovery is pooled over pairs as a ratio of sums, ``sum(patched - corrupt) / sum(clean - corrupt)``, which
stays defined when a single pair's twins barely differ. Attribution patching (one gradient) covers the full
sweep; exact patching re-measures the strongest slots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from interp.analysis import attribution_patch, verify_top_k
from studies.coreference.data import AgreementItem, ResolutionItem
from studies.coreference.forward import has_lm_head, prepend_bos
from studies.coreference.measure import agreement_spans, resolution_spans, target_ids
from studies.coreference.texts import question_prompt

ROLES_RESOLUTION = ("candidate 0", "candidate 1", "pronoun", "switch", "end", "prompt", "final", "other")
ROLES_AGREEMENT = ("antecedent", "distractor", "final", "other")


@dataclass
class Pair:
    """A twin pair ready to patch: ``clean``/``corrupt`` ``[2, pos]``, the metric and each position's role."""

    ids: tuple[str, str]
    clean: torch.Tensor
    corrupt: torch.Tensor
    metric: Callable[[torch.Tensor], torch.Tensor]
    roles: list[str]
    length: int


def _roles(tokens, spans: dict, order: Sequence[str], n_pos: int) -> list[str]:
    roles = ["other"] * n_pos
    for role in reversed(order):  # earlier roles win
        span = spans.get(role)
        if span is None or role == "other":
            continue
        positions = tokens.span_positions(*span, row=0)
        for p in positions[-1:] if role in ("pronoun", "switch", "end", "final") else positions:
            roles[p] = role
    if "prompt" in order and "end" in spans:
        end_pos = tokens.span_positions(*spans["end"], row=0)[-1]
        for p in range(end_pos + 1, n_pos):
            if roles[p] == "other":
                roles[p] = "prompt"
    return roles


def make_pairs(model, pairs: Sequence[tuple], limit: int) -> tuple[list[Pair], int]:
    """The first ``limit`` twin pairs whose texts tokenize to the same length, and how many qualified."""
    lm = has_lm_head(model)
    out, kept = [], 0
    for a, b in pairs:
        if isinstance(a, ResolutionItem):
            texts = [question_prompt(x).prefix if lm else x.sentence for x in (a, b)]
            spans = resolution_spans(a, lm)[1]
            order = ROLES_RESOLUTION
        else:
            texts = [a.prompt, b.prompt]
            spans = agreement_spans(a)
            order = ROLES_AGREEMENT
        tokens = model.to_tokens(texts, prepend_bos=prepend_bos(model), padding_side="right")
        if not bool(tokens.mask.all()):
            continue
        kept += 1
        if len(out) >= limit:
            continue
        ids, mask = tokens
        roles = _roles(tokens, spans, order, ids.shape[1])
        metric = _lm_metric(model, a, b, ids.shape[1]) if lm else _stream_metric(model, tokens, spans, a)
        out.append(Pair((a.id, b.id), ids, ids.flip(0), metric, roles, ids.shape[1]))
    return out, kept


def _answer_ids(model, item) -> list[int]:
    if isinstance(item, AgreementItem):
        return target_ids(model, item)
    q = question_prompt(item)
    ids = []
    for answer in q.answers:
        tokens = model.tokenizer.to_tokens(q.prefix + answer, prepend_bos=prepend_bos(model))
        ids.append(int(tokens.ids[0, tokens.span_positions(len(q.prefix), len(q.prefix) + len(answer))[0]]))
    return ids


def _lm_metric(model, a, b, n_pos: int):
    t = _answer_ids(model, a)
    signs = torch.tensor([1.0 if x.answer == 0 else -1.0 for x in (a, b)])

    def metric(logits: torch.Tensor) -> torch.Tensor:
        last = logits[:, -1].float()  # [2, d_vocab]
        return (signs.to(last.device) * (last[:, t[0]] - last[:, t[1]])).mean()

    return metric


@torch.no_grad()
def _stream_metric(model, tokens, spans: dict, item):
    role = "pronoun" if isinstance(item, ResolutionItem) else "final"
    position = tokens.span_positions(*spans[role], row=0)[-1]
    ids, mask = tokens
    out = model(ids, mask).float()[:, position]  # [2, d_model]
    diff = out - out.flip(0)  # clean row minus the other twin
    direction = diff / diff.pow(2).sum(-1, keepdim=True).clamp(min=1e-12)
    base = out.flip(0)

    def metric(stream: torch.Tensor) -> torch.Tensor:
        h = stream[:, position].float()
        return ((h - base.to(h.device)) * direction.to(h.device)).sum(-1).mean()

    return metric


def position_sweep(model, pairs: Sequence[Pair], roles: Sequence[str], top_k: int = 3):
    """Residual-stream patching by layer and position, pooled by role.

    Returns:
        ``(recovery [n_layers, n_roles], per_slot frame)``: the attribution estimate pooled over pairs, and
        for each pair its ``top_k`` slots re-measured exactly.
    """
    n_layers = model.cfg.n_layers
    sums = np.zeros((n_layers, len(roles)))
    denominator, exact = 0.0, []
    for pair in pairs:
        frame = attribution_patch(
            model, pair.clean, pair.corrupt, pair.metric, "blocks.{layer}.hook_resid_pre"
        )
        denominator += frame.attrs["clean_metric"] - frame.attrs["corrupt_metric"]
        for row in frame.itertuples():
            sums[int(row.layer), roles.index(pair.roles[int(row.position)])] += row.delta
        top = verify_top_k(model, pair.clean, pair.corrupt, pair.metric, frame, k=top_k)
        top["pair"] = "/".join(pair.ids)
        top["role"] = [pair.roles[int(p)] for p in top["position"]]
        exact.append(top)
    table = pd.concat(exact, ignore_index=True) if exact else pd.DataFrame()
    return sums / denominator if denominator else sums * np.nan, table, denominator


def head_sweep(model, pairs: Sequence[Pair], top_k: int = 5):
    """Per-head ``hook_z`` patching (all positions), attribution pooled over pairs, exact for the top ``k``.

    Returns:
        ``(recovery [n_layers, n_heads], verified frame, denominator)``; the verified frame's ``patched`` is
        pooled over pairs the same way.
    """
    cfg = model.cfg
    sums = np.zeros((cfg.n_layers, cfg.n_heads))
    denominator = 0.0
    frames = []
    for pair in pairs:
        frame = attribution_patch(
            model, pair.clean, pair.corrupt, pair.metric, "blocks.{layer}.attn.hook_z", by="head"
        )
        denominator += frame.attrs["clean_metric"] - frame.attrs["corrupt_metric"]
        for row in frame.itertuples():
            sums[int(row.layer), int(row.head)] += row.delta
        frames.append(frame)
    pooled = frames[0][["hook", "layer", "head"]].copy()
    pooled["delta"] = [sums[int(r.layer), int(r.head)] for r in pooled.itertuples()]
    pooled["value"] = pooled["delta"] / denominator
    # exact patching of the pooled top-k heads, pair by pair, summed the same way
    totals: dict[tuple[int, int], list[float]] = {}
    for pair in pairs:
        top = verify_top_k(model, pair.clean, pair.corrupt, pair.metric, pooled, k=top_k)
        for row in top.itertuples():
            key = (int(row.layer), int(row.head))
            totals[key] = totals.get(key, 0.0) + row.patched_delta
    verified = pd.DataFrame(
        [
            {
                "layer": layer,
                "head": head,
                "attribution": sums[layer, head] / denominator,
                "patched": patched / denominator,
            }
            for (layer, head), patched in totals.items()
        ]
    )
    if len(verified):
        verified = verified.sort_values("patched", ascending=False, key=abs, ignore_index=True)
    return sums / denominator if denominator else sums * np.nan, verified, denominator
