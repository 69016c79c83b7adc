"""The seed's question in one graph: why does "it" take its meaning from its referent, and does it?

Question. The seed pages say that the query at "it", with the switch word ("tired" / "wide"), finds the key of
the animal or of the street. In an attribution graph of the answer (animal - street after ' In that sentence,
"it" means the'; she - he at the pronoun for the agreement twins) that is an edge from the *referent* (the word
the expected answer names: the animal for "tired", the street for "wide", the name for agreement) into the
answer, and an edge between two positions passes through attention. For that edge (the feature or token node at
the referent with the largest absolute direct edge to the target) :meth:`AttributionGraph.explain_attention`
gives the heads that carry it and, for each of the top heads, its score from the answer's position to the
referent split into query-node x key-node terms of the graph's own nodes, and the difference against the other
candidate's key (the seed's pair; a one-person agreement prompt has no other candidate).

Test. The *named* nodes of the top head are the feature nodes whose parts raise its score most: query side, the
row sums of the matrix (``q_n . k``); key side, its column sums (``q . k_m``); only positive parts, at most
``named`` of them (errors, tokens and biases cannot be zeroed by a feature intervention; their share is in the
terms). They are zeroed in a free run of the replacement model (error terms kept, so the unedited run is the
model's own) and two things are read: the head's attention from the answer's position to the referent, and the
answer's logit difference, signed toward the expected answer (removing what carries the referent gives a negative
number). Baseline: ``draws`` seeded sets of as many feature nodes, each drawn at its named node's position among
the ``pool`` other active features there nearest to it in activation. Within a prompt the test is a consistency
check (the nodes were chosen on that prompt's score); held out, the nodes chosen on one twin are applied to the
other twin, where nothing was chosen: the twin's top head, each node moved to the same place by role (the
referent's to the twin's referent, the other candidate's to its other candidate, the rest aligned from the start
before the twins differ and from the end after) and kept where that feature is active there. In the seed's pair
the referents are different words (animal, street), so a held-out test asks whether what makes the head find
"the animal" in one twin makes it find "the street" in the other: what a mechanism that resolves the pronoun
would do.

Statistics. Means over prompts with 95% percentile bootstrap intervals resampling twin pairs
(``bootstrap_mean_interval(groups=schema)``); the seed's pair is one schema, so it has numbers and no interval.
"Named beats every random set" is counted against its chance ``1 / (draws + 1)``. A twin pair *resolves* when the
model's preference has the expected sign in both twins: chance 25% for random signs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from interp.analysis.node import Node
from interp.analysis.qk.matrix import top_entries
from interp.circuits.features import FeatureEdit, intervene
from interp.circuits.features.attention import BIAS, head_scores, key_difference
from interp.circuits.features.heads import edges_head_loadings
from studies.attribution import graphs
from studies.attribution.interventions import active_features, target_value
from studies.attribution.prompts import Prompt
from studies.attribution.seed_answer import summarise

Triple = tuple[int, int, int]  # (layer, position, feature)
SIDES = ("query", "key")


@dataclass(frozen=True)
class SeedSettings:
    """How the referent's edge is explained and tested."""

    top_heads: int = 3  # heads explained per edge
    named: int = 3  # feature nodes zeroed per side
    terms: int = 5  # query-node x key-node terms listed per head
    draws: int = 5  # matched random sets per test
    pool: int = 10  # nearest active features in activation a random node is drawn from
    seed: int = 0


def candidates(prompt: Prompt) -> tuple[str, str | None]:
    """``(referent, other)`` roles: the word the expected answer names and the other candidate (none for a
    one-person agreement prompt)."""
    if "name" in prompt.roles:
        return "name", None
    return ("animal", "street") if prompt.sign > 0 else ("street", "animal")


def referent_edge(graph: Any, prompt: Prompt) -> tuple[str, str] | None:
    """``(target, source)``: the feature or token node at the referent's positions with the largest absolute
    direct edge to the difference target ``logit.0`` (``None`` when every such edge is zero). The target sits at
    the last position and the referent before it, so the edge passes through attention."""
    positions = set(prompt.roles[candidates(prompt)[0]])
    target = graph.n_features + graph.n_errors + graph.n_pos  # the row of logit.0
    row = graph.adjacency[target].float().abs()
    best, value = None, 0.0
    for i, node in enumerate(graph.nodes[:target]):
        if node.kind in ("feature", "token") and node.position in positions and float(row[i]) > value:
            best, value = str(node), float(row[i])
    return None if best is None else (str(graph.nodes[target]), best)


def side_parts(score: Any, side: str) -> list[tuple[str, float]]:
    """Each node's part of a :class:`HeadScore`'s score on one side (query: row sums ``q_n . k``; key: column
    sums ``q . k_m``), largest first; the parts sum to the score."""
    m = score.matrix.double()  # [query node, key node]
    sums, names = (m.sum(1), score.query_components) if side == "query" else (m.sum(0), score.key_components)
    return sorted(zip(names, sums.tolist(), strict=True), key=lambda x: -x[1])


def named_nodes(score: Any, side: str, n: int) -> list[Triple]:
    """The ``n`` feature nodes whose parts raise the head's score most on ``side`` (positive parts only)."""
    out: list[Triple] = []
    for name, value in side_parts(score, side):
        if value <= 0 or len(out) == n:
            break
        if name == BIAS:
            continue
        node = Node.parse(name)
        if node.kind == "feature":
            out.append((node.layer, node.position, node.feature))
    return out


def matched_at_positions(
    named: list[Triple], active: torch.Tensor, values: torch.Tensor, draws: int, pool: int, seed: int
) -> list[list[Triple]]:
    """``draws`` sets, each with one feature per named node at the same position, drawn among the ``pool``
    other active features there nearest to it in activation (distinct within a set; seeded)."""
    rng = np.random.default_rng(seed)
    keys = [tuple(t) for t in active.tolist()]
    value_of = dict(zip(keys, values.tolist(), strict=True))
    avoid = set(named)
    sets = []
    for _ in range(draws):
        chosen: list[Triple] = []
        for t in named:
            here = [k for k in keys if k[1] == t[1] and k not in avoid and k not in chosen]
            if not here:
                raise ValueError(f"position {t[1]} has no other active feature to match {t} with")
            gaps = np.abs(np.array([value_of[k] for k in here]) - value_of.get(t, 0.0))
            near = [here[i] for i in np.argsort(gaps, kind="stable")[:pool]]
            chosen.append(near[int(rng.integers(len(near)))])
        sets.append(chosen)
    return sets


@torch.no_grad()
def free_run(
    model: Any, tc: Any, prompt: Prompt, zeroed: list[Triple], head: tuple[int, int], key: int
) -> tuple[float, float]:
    """``(target, attention)``: the logit difference ``a - b`` and ``head``'s attention from the last position to
    ``key`` in a free run of the replacement model with ``zeroed`` features set to 0."""
    layer, h = head
    seen: dict[str, float] = {}

    def keep(x: torch.Tensor, hook: Any) -> None:  # [batch, head, query, key]
        seen["attention"] = float(x[0, h, -1, key])

    edits = [FeatureEdit(lay, feature, position, scale=0.0) for lay, position, feature in zeroed]
    with model.hooks([(f"blocks.{layer}.attn.hook_pattern", keep)]):
        run = intervene(model, tc, prompt.tokens, edits, constrained=False)
    return target_value(model, run.logits, prompt), seen["attention"]


def aligned(a: torch.Tensor, b: torch.Tensor, position: int) -> int | None:
    """``position`` of token ids ``a`` at its place in ``b``: the same index in the shared start, the same
    distance from the end in the shared end, the same index in a differing middle of equal length; ``None``
    inside a middle whose length differs."""
    x, y = a.tolist(), b.tolist()
    prefix = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
    room = min(len(x), len(y)) - prefix
    suffix = next((i for i in range(room) if x[-1 - i] != y[-1 - i]), room)
    if position < prefix:
        return position
    if position >= len(x) - suffix:
        return position - len(x) + len(y)
    return position if len(x) == len(y) else None


def probe_nodes(
    model: Any, tc: Any, prompt: Prompt, nodes: list[Triple], head: tuple[int, int], key: int,
    clean: tuple[float, float], s: SeedSettings,
) -> dict:  # fmt: skip
    """Zero ``nodes`` and matched random sets; each run's change of the target (signed toward the answer) and
    of the head's attention to ``key``."""
    active, values = active_features(model, tc, prompt.tokens)
    randoms = matched_at_positions(nodes, active, values, s.draws, s.pool, s.seed) if nodes else []
    runs = [free_run(model, tc, prompt, z, head, key) for z in [nodes, *randoms]] if nodes else []
    logit = [prompt.sign * (r[0] - clean[0]) for r in runs]
    attention = [r[1] - clean[1] for r in runs]
    return {
        "nodes": [_name(t) for t in nodes],
        "random": [[_name(t) for t in z] for z in randoms],
        "logit": logit[0] if runs else float("nan"),
        "attention": attention[0] if runs else float("nan"),
        "random_logit": logit[1:],
        "random_attention": attention[1:],
    }


def _name(t: Triple) -> str:
    return str(Node.feature_node(t[0], t[1], t[2]))


@dataclass(frozen=True)
class Explained:
    """The referent's edge explained: its head loadings (of the difference target: those of its first token
    minus its second's) and, for each top head, its :class:`HeadScore` at the referent and, with another
    candidate, the :class:`QKDifference` of the two keys."""

    edge: float
    direct: float
    heads: tuple  # of HeadScore, loading set
    differences: tuple  # of QKDifference or None, one per head


def explain_edge(
    model: Any, tc: Any, graph: Any, source: str, top_heads: int, other_key: int | None
) -> Explained:
    """What :meth:`AttributionGraph.explain_attention` gives for ``source -> logit.0``, for the difference
    target (a direction, whose loadings are those of ``logit.1`` minus ``logit.2``, the targets' two tokens):
    the ``top_heads`` heads by absolute loading, each one's score split into query-node x key-node terms."""
    first, second = edges_head_loadings(model, tc, graph, [("logit.1", source), ("logit.2", source)])
    loads = first.heads - second.heads  # [layer, head]
    chosen = [(layer, head) for layer, head, value in top_entries(loads, top_heads) if value != 0.0]
    query, key = graph.n_pos - 1, Node.parse(source).position
    keys = (key,) if other_key is None else (key, other_key)
    scores = head_scores(model, tc, graph, [(lay, h, query, k) for lay, h in chosen for k in keys])
    heads = tuple(replace(scores[(lay, h, query, key)], loading=float(loads[lay, h])) for lay, h in chosen)
    diffs = tuple(
        None if other_key is None else key_difference(f, scores[(f.layer, f.head, query, other_key)])
        for f in heads
    )
    return Explained(first.edge - second.edge, first.direct - second.direct, heads, diffs)


def explain_prompt(model: Any, tc: Any, prompt: Prompt, gs: graphs.GraphSettings, s: SeedSettings) -> dict:
    """Draw ``prompt``'s graph, explain its referent's edge and test the top head's named nodes within it."""
    graph = graphs.draw(model, tc, prompt, gs, False)
    referent, other = candidates(prompt)
    out: dict[str, Any] = {"prompt": prompt.name, "schema": prompt.schema, "sign": prompt.sign}
    out.update(referent=referent, other=other, tokens=prompt.tokens.tolist(), tests={}, heads=[])
    out["clean"] = free_run(model, tc, prompt, [], (0, 0), 0)[0]
    edge = referent_edge(graph, prompt)
    out["edge"] = None if edge is None else list(edge)
    if edge is None:
        return out
    other_key = prompt.roles[other][-1] if other is not None else None
    found = explain_edge(model, tc, graph, edge[1], s.top_heads, other_key)
    key = Node.parse(edge[1]).position
    out.update(edge_value=graph.edge(*edge), loadings_edge=found.edge, direct=found.direct)
    out.update(key=key, other_key=other_key)
    out["heads"] = [_head_record(h, d, s) for h, d in zip(found.heads, found.differences, strict=True)]
    if not found.heads:
        return out
    top = found.heads[0]
    head = (top.layer, top.head)
    clean = free_run(model, tc, prompt, [], head, key)
    out.update(head=f"L{head[0]}H{head[1]}", attention_clean=clean[1])
    if other_key is not None:
        out["attention_other_clean"] = free_run(model, tc, prompt, [], head, other_key)[1]
    for side in SIDES:
        named = named_nodes(top, side, s.named)
        out["tests"][side] = probe_nodes(model, tc, prompt, named, head, key, clean, s)
    return out


def _head_record(h: Any, difference: Any, s: SeedSettings) -> dict:
    record = {
        "head": f"L{h.layer}H{h.head}",
        "loading": h.loading,
        "score": h.score,
        "pattern": h.pattern,
        "terms": [list(t) for t in h.top(s.terms)],
        "query_parts": [list(p) for p in side_parts(h, "query")[: s.terms]],
        "key_parts": [list(p) for p in side_parts(h, "key")[: s.terms]],
    }
    if difference is not None:
        record.update(
            difference=difference.difference,
            other_score=difference.second.score,
            other_pattern=difference.second.pattern,
            difference_terms=[list(t) for t in difference.top(s.terms)],
        )
    return record


def mapped(source: Prompt, test: Prompt, position: int) -> int | None:
    """``position`` of ``source`` in ``test`` by role: a position in the source's referent (other candidate) goes
    to the test's referent (other candidate) at the same distance from the word's end; any other position is
    :func:`aligned`. ``None`` where the test has no such place."""
    for side, role in zip(candidates(source), candidates(test), strict=True):
        if side is not None and position in source.roles[side]:
            back = source.roles[side][-1] - position
            span = test.roles[role] if role is not None else []
            return span[-1] - back if back < len(span) else None
    return aligned(source.tokens, test.tokens, position)


def held_out(model: Any, tc: Any, rows: list[dict], prompts: list[Prompt], s: SeedSettings) -> None:
    """Apply each prompt's named nodes to its twin, where they were not chosen (in place: ``tests
    ["query_heldout"]``, ``["key_heldout"]``): the twin's head, positions :func:`mapped` by role, only the nodes
    active at their new place kept; the attention read at this prompt's own referent."""
    by_name = {p.name: p for p in prompts}
    for row, prompt in zip(rows, prompts, strict=True):
        twins = [r for r in rows if r["schema"] == row["schema"] and r["prompt"] != row["prompt"]]
        if len(twins) != 1 or not twins[0]["tests"] or "key" not in row:
            continue
        source, twin = twins[0], by_name[twins[0]["prompt"]]
        head = tuple(int(x) for x in source["head"][1:].split("H"))
        clean = (row["clean"], free_run(model, tc, prompt, [], head, row["key"])[1])
        active = {tuple(t) for t in active_features(model, tc, prompt.tokens)[0].tolist()}
        for side in SIDES:
            moved = []
            for name in source["tests"][side]["nodes"]:
                n = Node.parse(name)
                at = mapped(twin, prompt, n.position)
                if at is not None and (n.layer, at, n.feature) in active:
                    moved.append((n.layer, at, n.feature))
            found = probe_nodes(model, tc, prompt, moved, head, row["key"], clean, s)
            found.update(selected_on=source["prompt"], head=source["head"])
            found["offered"] = len(source["tests"][side]["nodes"])
            row["tests"][f"{side}_heldout"] = found


def across_pairs(model: Any, tc: Any, rows: list[dict], prompts: list[Prompt], s: SeedSettings) -> None:
    """Apply to each prompt the query nodes named at the last position on the *other* twin pairs (in place:
    ``tests["query_across"]``): the ``named`` (layer, feature) named there most often (ties: first named), at
    this prompt's last position where active, and the head most often on top there. Nothing where the group has
    one twin pair."""
    from collections import Counter

    for row, prompt in zip(rows, prompts, strict=True):
        others = [r for r in rows if r["schema"] != row["schema"] and r["tests"].get("query")]
        if not others or "key" not in row:
            continue
        named = Counter()
        for r in others:
            for name in r["tests"]["query"]["nodes"]:
                n = Node.parse(name)
                if n.position == len(r["tokens"]) - 1:
                    named[(n.layer, n.feature)] += 1
        head_name = Counter(r["head"] for r in others).most_common(1)[0][0]
        head = tuple(int(x) for x in head_name[1:].split("H"))
        last = len(prompt.tokens) - 1
        active = {tuple(t) for t in active_features(model, tc, prompt.tokens)[0].tolist()}
        picked = [(lay, f) for (lay, f), _ in named.most_common()][: s.named]
        moved = [(lay, last, f) for lay, f in picked if (lay, last, f) in active]
        clean = (row["clean"], free_run(model, tc, prompt, [], head, row["key"])[1])
        found = probe_nodes(model, tc, prompt, moved, head, row["key"], clean, s)
        found.update(head=head_name, offered=len(picked), selected_on=sorted({r["schema"] for r in others}))
        row["tests"]["query_across"] = found


def run(model: Any, tc: Any, groups: dict[str, list[Prompt]], gs: graphs.GraphSettings, s: SeedSettings,
        progress: bool = False) -> dict:  # fmt: skip
    """Every group's prompts explained and tested (``groups[name]["rows"]``), with their summaries."""
    from dataclasses import asdict

    from tqdm.auto import tqdm

    out: dict[str, Any] = {"settings": asdict(s), "groups": {}}
    for name, prompts in groups.items():
        rows = [explain_prompt(model, tc, p, gs, s) for p in tqdm(prompts, desc=f"{name} referent edges",
                                                                  disable=not progress)]  # fmt: skip
        held_out(model, tc, rows, prompts, s)
        across_pairs(model, tc, rows, prompts, s)
        out["groups"][name] = {"rows": rows, "summary": summarise(rows, s.draws, s.seed)}
    return out
