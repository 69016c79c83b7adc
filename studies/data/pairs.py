"""Twin pairs as patchable batches: clean ``[A, B]`` and corrupt ``[B, A]``, a metric, and each position's role.

Each pair is run as a batch of two, so one patch measures both directions. The metric is the logit difference
between the two answers at the prediction position (the question prompt's last token for resolution, the
next-pronoun position for agreement), signed so that the clean row's answer is positive. An encoder has no
logits; its metric is the projection of the final stream at the pronoun (resolution) or the last token
(agreement) onto the clean-minus-corrupt difference there, scaled so that clean is 1 and corrupt 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from interp.analysis import Batch, Metric
from studies.data.forward import has_lm_head, prepend_bos
from studies.data.items import AgreementItem, ResolutionItem
from studies.data.spans import agreement_spans, resolution_spans, target_ids
from studies.data.texts import question_prompt

ROLES_RESOLUTION = ("candidate 0", "candidate 1", "pronoun", "switch", "end", "prompt", "final", "other")

ROLES_AGREEMENT = ("antecedent", "distractor", "final", "other")


@dataclass
class Pair:
    """A twin pair ready to patch: ``clean``/``corrupt`` ``[2, pos]``, the metric (one value per twin, as every
    analysis function takes it: patching averages the two) and each position's role."""

    ids: tuple[str, str]
    clean: torch.Tensor
    corrupt: torch.Tensor
    metric: Metric
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


def make_pairs(model, pairs: Sequence[tuple], limit: int, bos: bool | None = None) -> tuple[list[Pair], int]:
    """The first ``limit`` twin pairs whose texts tokenize to the same length, and how many qualified.

    The pairs must be comparable (same candidates and pronoun, or targets: see
    :class:`~studies.data.twins.Pairing`); ``bos`` as in :func:`~studies.data.forward.prepend_bos`.
    """
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
        tokens = model.to_tokens(texts, prepend_bos=prepend_bos(model, bos), padding_side="right")
        if not bool(tokens.mask.all()):
            continue
        kept += 1
        if len(out) >= limit:
            continue
        ids, mask = tokens
        roles = _roles(tokens, spans, order, ids.shape[1])
        metric = _lm_metric(model, a, b, bos) if lm else _stream_metric(model, tokens, spans, a)
        out.append(Pair((a.id, b.id), ids, ids.flip(0), metric, roles, ids.shape[1]))
    return out, kept


def _answer_ids(model, item, bos: bool | None) -> list[int]:
    if isinstance(item, AgreementItem):
        return target_ids(model, item, bos)
    q = question_prompt(item)
    ids = []
    for answer in q.answers:
        tokens = model.tokenizer.to_tokens(q.prefix + answer, prepend_bos=prepend_bos(model, bos))
        ids.append(int(tokens.ids[0, tokens.span_positions(len(q.prefix), len(q.prefix) + len(answer))[0]]))
    return ids


def _lm_metric(model, a, b, bos: bool | None):
    t = _answer_ids(model, a, bos)
    signs = torch.tensor([1.0 if x.answer == 0 else -1.0 for x in (a, b)])

    def metric(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        last = logits[:, -1].float()  # [2, d_vocab]
        return signs.to(last.device) * (last[:, t[0]] - last[:, t[1]])

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

    def metric(stream: torch.Tensor, batch: Batch) -> torch.Tensor:
        h = stream[:, position].float()
        return ((h - base.to(h.device)) * direction.to(h.device)).sum(-1)

    return metric
