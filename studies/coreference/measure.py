"""The map over items: one record per item with its scores, its heads' attention masses and probe features.

Every number later reductions need is computed here, per item, so that items can be split across ranks and
the records gathered and merged exactly (the reductions are sums and counts over records).

For a resolution item the model reads (causal LM) the question prompt with the first candidate appended,
which holds the sentence as its prefix, so one cached pass gives the question score, the attention from the
pronoun, the switch word, the sentence's full stop and the prompt's last token, and the probe features; the
second candidate needs its own pass only when it is more than one token; the two substitutions give the full
and partial scores, and the lm-eval-harness score too where its text is the same (else it gets a pass of its
own). An encoder reads the sentence alone (no scoring). A role an item lacks (no switch word, a candidate not
found) gives NaN attention masses, which the reductions skip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from interp.analysis import span_attention
from studies.data.forward import (
    Batch,
    bos_prepended,
    has_lm_head,
    prepend_bos,
    run_batches,
    scored_sum,
    span_sum,
    tail_sum,
)
from studies.data.items import AgreementItem, ResolutionItem
from studies.data.spans import agreement_spans, resolution_spans, target_ids
from studies.data.texts import lm_eval_texts, question_prompt, substitute

BY = ("weight", "norm")
RESOLUTION_QUERIES = ("pronoun", "switch", "end", "final")
AGREEMENT_QUERIES = ("final",)
RESOLUTION_KEYS = ("candidate 0", "candidate 1")
AGREEMENT_KEYS = ("antecedent", "distractor")


@dataclass
class Measured:
    """One item's measurements.

    Attributes:
        record: the JSON-ready per-item record (id, scores, predictions, correctness).
        mass: ``[query, key, by, n_layers, n_heads]`` attention mass from each query role to each key span,
            by weight and by norm; NaN where the role or span does not exist.
        features: ``{role: [n_layers, d_model]}`` residual stream after each block, for probes.
        positions: token positions of the roles in the cached pass (for the seed picture and checks).
    """

    record: dict
    mass: np.ndarray
    features: dict[str, np.ndarray] = field(default_factory=dict)
    positions: dict[str, int] = field(default_factory=dict)


def cache_names(model) -> list[str]:
    n = model.cfg.n_layers
    names = [f"blocks.{layer}.attn.hook_{leaf}" for layer in range(n) for leaf in ("pattern", "v")]
    return names + [f"blocks.{layer}.hook_resid_post" for layer in range(n)]


def head_masses(model, batch: Batch, queries: torch.Tensor, keys: torch.Tensor) -> np.ndarray:
    """Attention mass per head from query positions to key spans, by weight and norm.

    Args:
        queries: ``[n_query, batch, pos]`` boolean, one position per row (a row without one gives NaN).
        keys: ``[n_key, batch, pos]`` boolean spans (a row without one gives NaN).

    Returns:
        ``[batch, n_query, n_key, 2, n_layers, n_heads]``.
    """
    by = [span_attention(model, batch.cache, queries, keys, by=b, reduce="none") for b in BY]
    return torch.stack(by, dim=3).numpy()  # [batch, query, key, by, layer, head]


def _mask(batch: Batch, spans: Sequence[tuple[int, int] | None], last_only: bool) -> torch.Tensor:
    """``[batch, pos]`` boolean mask of the tokens covering each row's character span."""
    b, n_pos = batch.tokens.ids.shape
    mask = torch.zeros(b, n_pos, dtype=torch.bool)
    for row, span in enumerate(spans):
        if span is None:
            continue
        positions = batch.tokens.span_positions(span[0], span[1], row)
        mask[row, positions[-1:] if last_only else positions] = True
    return mask


def _features(batch: Batch, model, positions: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Per row, ``[n_role, n_layers, d_model]``: the stream after each block at the row's role positions."""
    stream = torch.stack(
        [batch.cache[f"blocks.{layer}.hook_resid_post"] for layer in range(model.cfg.n_layers)], dim=1
    )  # [batch, layer, pos, d_model]
    return [stream[row, :, list(pos)].transpose(0, 1).float().numpy() for row, pos in enumerate(positions)]


def measure_resolution(
    model,
    items: Sequence[ResolutionItem],
    *,
    batch_size: int = 16,
    progress: bool = True,
    bos: bool | None = None,
) -> list[Measured]:
    """Score, attention masses and probe features for each resolution item (see the module docstring).

    Items are taken ``batch_size`` at a time, and each such chunk's passes are batched on their own, so a
    chunk is computed the same way whichever items come before it (ranks holding whole chunks agree exactly
    with one process). ``bos``: ``--prepend-bos`` (True), ``--no-prepend-bos`` (False) or the default (None).
    """
    causal = has_lm_head(model)
    bar = tqdm(total=len(items), desc="resolution items", unit="item", disable=not progress, leave=False)
    out: list[Measured] = []
    for start in range(0, len(items), batch_size):
        out += _resolution_chunk(model, items[start : start + batch_size], causal, bos)
        bar.update(min(batch_size, len(items) - start))
    bar.close()
    return out


def _resolution_chunk(
    model, items: Sequence[ResolutionItem], causal: bool, bos: bool | None
) -> list[Measured]:
    """One cached pass over the chunk, then (causal LM) the substitutions and the multi-token answers."""
    batch_size = len(items)
    queries = RESOLUTION_QUERIES if causal else RESOLUTION_QUERIES[:3]
    texts, spans = zip(*(resolution_spans(item, causal) for item in items), strict=True)
    extra: dict[int, str] = {}
    if causal:
        for i, item in enumerate(items):
            q = question_prompt(item)
            if _n_answer_tokens(model, q.prefix, q.answers[1], bos) > 1:
                extra[i] = q.prefix + q.answers[1]
    out: list[Measured] = []
    question = np.full((len(items), 2), np.nan)
    (batch,) = run_batches(model, texts, batch_size=batch_size, names_filter=cache_names(model), bos=bos)
    q_masks = torch.stack([_mask(batch, [s[r] for s in spans], True) for r in queries])
    k_masks = torch.stack([_mask(batch, [s[k] for s in spans], False) for k in RESOLUTION_KEYS])
    mass = head_masses(model, batch, q_masks, k_masks)
    positions = [
        {r: int(q_masks[qi, j].nonzero()[0]) for qi, r in enumerate(queries) if bool(q_masks[qi, j].any())}
        for j in range(len(items))
    ]
    roles = [r for r in ("pronoun", "end", "final") if r in queries]
    features = _features(batch, model, [[pos[r] for r in roles] for pos in positions])
    for i in range(len(items)):
        pos = positions[i]
        if causal:
            question[i, 0] = span_sum(batch, i, *spans[i]["answer 0"])
            if i not in extra:
                question[i, 1] = _single_token_logprob(model, batch, i, items[i], bos)
        out.append(Measured({}, mass[i], dict(zip(roles, features[i], strict=True)), pos))
    del batch
    full = np.full((len(items), 2), np.nan)
    partial = np.full((len(items), 2), np.nan)
    lm_eval = np.full((len(items), 2), np.nan)
    if causal:
        scored_from_start = bos_prepended(model, bos)
        subs = [substitute(item, c) for item in items for c in (0, 1)]
        harness = [lm_eval_texts(item, c) for item in items for c in (0, 1)]
        context_tokens = [
            int(model.tokenizer.to_tokens(h.context, prepend_bos=prepend_bos(model, bos)).mask.sum())
            for h in harness
        ]
        for batch in run_batches(model, [s.text for s in subs], batch_size=batch_size, bos=bos):
            for j in range(len(batch.tokens.texts)):
                k = batch.start + j
                full[k // 2, k % 2] = span_sum(batch, j, 0) if scored_from_start else scored_sum(batch, j)
                partial[k // 2, k % 2] = span_sum(batch, j, subs[k].end)
                if harness[k].text == subs[k].text:
                    lm_eval[k // 2, k % 2] = tail_sum(batch, j, context_tokens[k])
        own: dict[str, list[int]] = {}  # lm-eval texts that differ from the substitution: their own passes
        for k, h in enumerate(harness):
            if h.text != subs[k].text:
                own.setdefault(h.text, []).append(k)
        for batch in run_batches(model, list(own), batch_size=batch_size, bos=bos):
            for j, text in enumerate(batch.tokens.texts):
                for k in own[text]:
                    lm_eval[k // 2, k % 2] = tail_sum(batch, j, context_tokens[k])
        order = sorted(extra)
        for batch in run_batches(model, [extra[i] for i in order], batch_size=batch_size, bos=bos):
            for j in range(len(batch.tokens.texts)):
                i = order[batch.start + j]
                prefix = question_prompt(items[i]).prefix
                question[i, 1] = span_sum(batch, j, len(prefix), len(batch.tokens.texts[j]))
    for i, (item, m) in enumerate(zip(items, out, strict=True)):
        m.record = resolution_record(item, full[i], partial[i], question[i], causal, lm_eval[i])
    return out


def _n_answer_tokens(model, prefix: str, answer: str, bos: bool | None = None) -> int:
    tokens = model.tokenizer.to_tokens(prefix + answer, prepend_bos=prepend_bos(model, bos))
    return len(tokens.span_positions(len(prefix), len(prefix) + len(answer)))


def _single_token_logprob(
    model, batch: Batch, row: int, item: ResolutionItem, bos: bool | None = None
) -> float:
    """Log-probability of the one-token second answer, read at the prompt's end in the cached pass."""
    q = question_prompt(item)
    tokens = model.tokenizer.to_tokens(q.prefix + q.answers[1], prepend_bos=prepend_bos(model, bos))
    position = tokens.span_positions(len(q.prefix), len(q.prefix) + len(q.answers[1]))[0]
    token = int(tokens.ids[0, position])
    if not torch.equal(tokens.ids[0, :position].cpu(), batch.tokens.ids[row, :position].cpu()):
        raise ValueError(f"item {item.id!r}: the question prompt tokenizes differently before each answer")
    return float(batch.logits[row, position - 1].log_softmax(-1)[token])


def _pick(scores: np.ndarray) -> int | None:
    return None if np.isnan(scores).any() else int(np.argmax(scores))


def nearest_candidate(item: ResolutionItem) -> int | None:
    """Index of the candidate mentioned closer before the pronoun (``None`` when a position is unknown)."""
    offsets = item.candidate_char_offsets
    if offsets is None or None in offsets:
        return None
    return int(offsets[1] > offsets[0])  # type: ignore[operator]


def resolution_record(item: ResolutionItem, full, partial, question, causal: bool, lm_eval=None) -> dict:
    record = {
        "id": item.id,
        "schema_id": item.schema_id,
        "answer": item.answer,
        "candidates": list(item.candidates),
        "switch_after_pronoun": (
            None if item.switch_char_offset is None else item.switch_char_offset > item.pronoun_char_offset
        ),
        "nearest_candidate": nearest_candidate(item),
    }
    if not causal:
        return record
    lm_eval = np.full(2, np.nan) if lm_eval is None else lm_eval
    scores = (("full", full), ("partial", partial), ("question", question), ("lm_eval", lm_eval))
    preds = {name: _pick(v) for name, v in scores}
    record.update({name: [float(x) for x in v] for name, v in scores})
    record.update({f"pred_{name}": pred for name, pred in preds.items()})
    record["correct"] = {name: pred == item.answer for name, pred in preds.items()}
    return record


def measure_agreement(
    model,
    items: Sequence[AgreementItem],
    *,
    batch_size: int = 16,
    progress: bool = True,
    bos: bool | None = None,
) -> list[Measured]:
    """Target logits, attention from the prediction position and probe features for each agreement item."""
    causal = has_lm_head(model)
    bar = tqdm(total=len(items), desc="agreement passes", unit="text", disable=not progress, leave=False)
    out: list[Measured] = []
    texts = [item.prompt for item in items]
    for batch in run_batches(
        model, texts, batch_size=batch_size, names_filter=cache_names(model), progress=bar, bos=bos
    ):
        rows = range(batch.start, batch.start + len(batch.tokens.texts))
        row_spans = [agreement_spans(items[i]) for i in rows]
        q_masks = torch.stack([_mask(batch, [s["final"] for s in row_spans], True)])
        k_masks = torch.stack([_mask(batch, [s[k] for s in row_spans], False) for k in AGREEMENT_KEYS])
        mass = head_masses(model, batch, q_masks, k_masks)
        ante = _mask(batch, [s["antecedent"] for s in row_spans], True)
        positions = [
            {"final": int(q_masks[0, j].nonzero()[0]), "antecedent": int(ante[j].nonzero()[0])}
            for j in range(len(rows))
        ]
        features = _features(batch, model, [list(pos.values()) for pos in positions])
        for j, i in enumerate(rows):
            item = items[i]
            pos = positions[j]
            record = {
                "id": item.id,
                "schema_id": item.schema_id,
                "answer": item.answer,
                "targets": list(item.targets),
                "two_people": item.distractor is not None,
                "antecedent_is_recent": item.distractor is None
                or item.antecedent_char_offset > item.distractor_char_offset,
            }
            if causal:
                logits = batch.logits[j, pos["final"], target_ids(model, item, bos)]
                others = [float(x) for k, x in enumerate(logits) if k != item.answer]
                record.update(
                    target_logits=[float(x) for x in logits],
                    logit_diff=float(logits[item.answer]) - max(others),
                    pred=int(logits.argmax()),
                    correct=bool(int(logits.argmax()) == item.answer),
                )
            out.append(Measured(record, mass[j], dict(zip(pos, features[j], strict=True)), pos))
    bar.close()
    return out
