"""Per twin: where the sentence's positions are, each head's preference, its QK split, and the intervention."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from interp.analysis.decompose import decompose_stream
from interp.analysis.qk import qk_names
from interp.analysis.qk.difference import qk_key_difference
from interp.analysis.qk.prompt import as_prompt

SEED = (
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
)
QUERY_GROUPS = ("switch word", "pronoun", "candidates", "other positions", "MLPs at the query", "embeddings")
KEY_GROUPS = ("candidate token", "MLPs at the candidate", "heads at the candidate", "biases")


@dataclass
class Twin:
    """One sentence of a pair: positions of the roles (last token of each) and the cached run.

    Attributes:
        referent, foil: key positions (last token of the right and the wrong candidate).
        answer: which candidate is the referent (0: the one mentioned first).
        query: the sentence's last token, the first position that has seen the pronoun and the switch word.
        switch, pronoun, candidates: token positions of those words.
        preference: ``[layer, head]`` score(query, referent) - score(query, foil).
    """

    text: str
    query: int
    referent: int
    foil: int
    switch: set[int]
    pronoun: set[int]
    candidates: set[int]
    preference: np.ndarray
    answer: int = 0
    cache: object = None


def locate(model, text: str, pronoun: tuple[int, int], candidates, answer: int, switch) -> Twin:
    """The roles' positions in ``text`` (character spans of the pronoun, candidates and switch word)."""
    tokens = model.to_tokens(text)
    spans = [tokens.span_positions(start, end) for start, end in candidates]
    return Twin(
        text=text,
        query=int(tokens.mask[0].sum()) - 1,
        referent=spans[answer][-1],
        foil=spans[1 - answer][-1],
        switch=set(tokens.span_positions(*switch)),
        pronoun=set(tokens.span_positions(*pronoun)),
        candidates={p for s in spans for p in s},
        preference=np.zeros(0),
        answer=answer,
    )


def run_twin(model, twin: Twin) -> None:
    """One forward: every layer's scores (the preferences) and what QK attribution needs at every layer."""
    names = set()
    for layer in range(model.cfg.n_layers):
        names.update(qk_names(model, layer))
    prompt = as_prompt(model, twin.text)
    with torch.no_grad():
        _, cache = model.run_with_cache(prompt.ids, names_filter=sorted(names))
    scores = torch.stack([cache["attn_scores", l][0, :, twin.query] for l in range(model.cfg.n_layers)])
    twin.preference = (scores[..., twin.referent] - scores[..., twin.foil]).float().numpy()
    twin.cache = cache


def _query_group(component, twin: Twin) -> str:
    if component.kind == "head":
        for name, where in (("switch word", twin.switch), ("pronoun", twin.pronoun)):
            if component.source in where:
                return name
        return "candidates" if component.source in twin.candidates else "other positions"
    return "MLPs at the query" if component.kind == "mlp" else "embeddings"


def _key_group(component) -> str:
    return {
        "token": "candidate token",
        "pos_embed": "candidate token",
        "mlp": "MLPs at the candidate",
        "head": "heads at the candidate",
    }.get(component.kind, "biases")


def split_preference(model, twin: Twin, layer: int, head: int, top: int) -> dict:
    """The preference's QK split: shares by query and key group, the top query components and their parts."""
    diff = qk_key_difference(
        model, twin.text, layer, head, twin.query, twin.referent, twin.foil, cache=twin.cache
    )
    total = diff.total
    rows = diff.matrix.double().sum(1)  # [query component]
    cols = diff.matrix.double().sum(0)  # [key component]
    query_terms = dict.fromkeys(QUERY_GROUPS, 0.0)  # each group's terms, in score units
    for component, value in zip(diff.query_components, rows.tolist(), strict=True):
        query_terms[_query_group(component, twin)] += value
    key_terms = dict.fromkeys(KEY_GROUPS, 0.0)
    for component, value in zip(diff.key_components, cols.tolist(), strict=True):
        key_terms[_key_group(component)] += value
    prompt = as_prompt(model, twin.text)
    components, parts = decompose_stream(
        model, twin.cache, layer, position=twin.query, heads="source", tokens=prompt.tokens
    )
    stream_rows = rows[: len(components)]  # the stream's parts come first, the projection's biases after
    order = stream_rows.argsort(descending=True)[:top].tolist()
    return {
        "total": total,
        "query_terms": query_terms,
        "key_terms": key_terms,
        "top": [(components[i].label, float(stream_rows[i])) for i in order],
        "top_index": order,
        "parts": parts,
        "best_pair": diff.table(top=1).iloc[0].to_dict(),
    }


def matched_random(
    parts: torch.Tensor, top: list[int], draws: int, rng: np.random.Generator
) -> list[list[int]]:
    """Per draw, one component for each top one, drawn among the 8 others closest to it in norm; no draws
    when there are fewer other components than top ones (a layer-0 query is its token's embedding alone)."""
    norms = parts.norm(dim=-1).numpy()
    others = np.array([i for i in range(len(norms)) if i not in set(top)], dtype=int)
    if len(others) < len(top):
        return []
    out = []
    for _ in range(draws):
        chosen: list[int] = []
        for i in top:
            pool = [j for j in others[np.argsort(np.abs(norms[others] - norms[i]))] if j not in chosen][:8]
            chosen.append(int(rng.choice(pool)))
        out.append(chosen)
    return out


def intervene(
    model, twin: Twin, layer: int, head: int, parts: torch.Tensor, sets: list[list[int]]
) -> np.ndarray:
    """The head's preference with each set of stream parts removed from its query's input (norm recomputed).

    Row 0 is the clean run; row ``1 + i`` removes ``sets[i]``. Returns the preferences ``[1 + len(sets)]``.
    """
    prompt = as_prompt(model, twin.text)
    rows = 1 + len(sets)
    deltas = torch.zeros(rows, parts.shape[-1], device=model.device)
    for r, chosen in enumerate(sets, start=1):
        deltas[r] = parts[chosen].sum(0).to(model.device)
    captured = {}

    def edit(x, hook):
        x = x.clone()
        x[:, twin.query, head] -= deltas.to(x.dtype)  # [row, d_model]
        return x

    def keep(scores, hook):
        captured["scores"] = scores[:, head, twin.query].float()  # [row, key]

    with torch.no_grad(), model.split_inputs():
        model.run_with_hooks(
            prompt.ids.expand(rows, -1),
            fwd_hooks=[
                (f"blocks.{layer}.hook_q_input", edit),
                (f"blocks.{layer}.attn.hook_attn_scores", keep),
            ],
        )
    scores = captured["scores"]
    return (scores[:, twin.referent] - scores[:, twin.foil]).cpu().numpy()
