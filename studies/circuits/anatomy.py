"""What the chosen circuit is made of: its heads against the coreference study's, its behaviour on one- and
two-person prompts, the heads that attend to the name, and where its MLPs act.

Called on every rank, like :mod:`studies.circuits.analysis`; these passes are small and are repeated on each.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from interp.analysis import attribution_patch, bootstrap_mean_interval
from interp.circuits import Circuit, EdgeScores, corrupt_run, faithfulness, logit_difference, run_circuit
from studies.circuits.data import StudyPairs
from studies.data.switch import SwitchSummary, summarise, switch_from_margins

LABELS = ("the first pronoun of the pair (she, her, herself; they, their)", "the other")

COREFERENCE_HEADS = ((25, 2), (26, 2))
"""Heads whose outputs (``hook_z``), patched between agreement twins, recovered most of the pronoun logit
difference in the coreference study on SmolLM2-135M (``interp study coreference``)."""


@torch.no_grad()
def per_pair_metrics(model, circuit: Circuit, pairs: StudyPairs, batch_size: int) -> pd.DataFrame:
    """Per pair: the metric of the full model, the corrupted input and the circuit."""
    rows = []
    for span in pairs.pairs.batches(batch_size):
        batch = pairs.pairs[span.start : span.stop].to(model.device)
        corrupt = corrupt_run(model, batch)
        values = {
            "corrupt": logit_difference(corrupt.logits, batch),
            "full": logit_difference(run_circuit(model, Circuit.full(circuit.graph), batch, corrupt), batch),
            "circuit": logit_difference(run_circuit(model, circuit, batch, corrupt), batch),
        }
        for k, i in enumerate(span):
            rows.append(
                {
                    "pair": "/".join(pairs.ids[i]),
                    "two_people": pairs.two_people[i],
                    "first": pairs.first[i],
                    **{n: float(v[k]) for n, v in values.items()},
                }
            )
    return pd.DataFrame(rows)


def by_people(per_pair: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Faithfulness and accuracy (metric > 0: the clean answer preferred; chance 0.5) on one- and two-person
    prompts. The accuracies get 95% bootstrap intervals that resample twin pairs: a pair's two directions (each
    twin clean once) are not independent, so they are drawn together."""
    rows = []
    for label, part in (
        ("one person", per_pair[~per_pair["two_people"]]),
        ("two people", per_pair[per_pair["two_people"]]),
        ("all", per_pair),
    ):
        if not len(part):
            continue
        full, corrupt, value = part["full"].mean(), part["corrupt"].mean(), part["circuit"].mean()
        rows.append(
            {
                "prompts": label,
                "pairs": len(part),
                "full": full,
                "corrupt": corrupt,
                "circuit": value,
                "faithfulness": faithfulness(value, full, corrupt),
                **_accuracy("full", part, seed),
                **_accuracy("circuit", part, seed),
            }
        )
    return pd.DataFrame(rows)


def switch_by_people(per_pair: pd.DataFrame, seed: int = 0) -> dict[str, dict[str, SwitchSummary]]:
    """The switch sensitivity and bias (:mod:`studies.data.switch`) of the full model and of the circuit alone,
    on one- and two-person prompts and on all: a twin pair's two directions hold each twin's margin for its own
    pronoun (the metric with that twin clean), so their sum is the twin difference of the preference."""
    out: dict[str, dict[str, SwitchSummary]] = {}
    for label, part in (
        ("one person", per_pair[~per_pair["two_people"]]),
        ("two people", per_pair[per_pair["two_people"]]),
        ("all", per_pair),
    ):
        rows = {tuple(r["pair"].split("/")): r for r in part.to_dict("records")}
        twins = sorted({tuple(sorted(k)) for k in rows if tuple(reversed(k)) in rows})
        if not twins:
            continue
        out[label] = {
            column: summarise(
                [
                    switch_from_margins(
                        rows[(a, b)][column], rows[(b, a)][column], 0 if rows[(a, b)]["first"] else 1
                    )
                    for a, b in twins
                ],
                labels=LABELS,
                unit="logits",
                seed=seed,
            )
            for column in ("full", "circuit")
        }
    return out


def switch_table(found: dict[str, dict[str, SwitchSummary]]) -> pd.DataFrame:
    """One row per prompt set and run (the full model, the circuit alone)."""
    rows = []
    for label, runs in found.items():
        for run, s in runs.items():
            sens, bias = s.sensitivity, s.bias
            rows.append(
                {
                    "prompts": label,
                    "run": run,
                    "twin pairs": s.n_pairs,
                    "sensitivity": sens.estimate,
                    "sens_low": sens.interval.low,
                    "sens_high": sens.interval.high,
                    "sens_p": sens.p_value,
                    "bias": bias.estimate,
                    "bias_low": bias.interval.low,
                    "bias_high": bias.interval.high,
                    "right_both": s.right_both,
                    "right_both_chance": s.chance,
                }
            )
    return pd.DataFrame(rows)


def _accuracy(column: str, part: pd.DataFrame, seed: int) -> dict:
    """``accuracy_COLUMN`` and its interval bounds, resampling twin pairs (``a/b`` and ``b/a`` are one)."""
    right = (part[column] > 0).to_numpy(float)
    twins = ["/".join(sorted(p.split("/"))) for p in part["pair"]]
    _, low, high = bootstrap_mean_interval(right, 2000, seed, groups=twins)
    name = f"accuracy_{column}"
    return {name: float(right.mean()), f"{name}_low": low, f"{name}_high": high}


@torch.no_grad()
def name_attention(model, pairs: StudyPairs, layers: list[int], batch_size: int) -> np.ndarray:
    """``[n_layers, n_heads]`` mean attention from the read position to the antecedent's tokens (clean inputs;
    NaN for layers not asked for)."""
    cfg = model.cfg
    out = np.full((cfg.n_layers, cfg.n_heads), np.nan)
    if not layers:
        return out
    sums = np.zeros((len(layers), cfg.n_heads))
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in layers]
    for span in pairs.pairs.batches(batch_size):
        batch = pairs.pairs[span.start : span.stop].to(model.device)
        _, cache = model.run_with_cache(batch.clean, batch.attention_mask, names_filter=names)
        read = batch.read_positions()
        for k, i in enumerate(span):
            for li, name in enumerate(names):
                pattern = cache[name][k, :, int(read[k])]  # [head, key]
                sums[li] += pattern[:, pairs.names[i]].sum(-1).float().cpu().numpy()
    out[layers] = sums / len(pairs)
    return out


def heads_table(
    circuit: Circuit, scores: EdgeScores, attention: np.ndarray, reference=COREFERENCE_HEADS
) -> pd.DataFrame:
    """The circuit's heads and the reference heads: edges in and out, summed ``|score|`` of those edges, and
    attention from the read position to the antecedent."""
    graph = circuit.graph
    mask = circuit.mask
    weight = scores.scores.abs() * mask
    rows = []
    for layer, head in sorted(set(circuit.heads) | set(reference)):
        name = f"L{layer}.H{head}"
        i = graph.source_index(name)
        cols = [
            graph.input_index(f"{name}.q"),
            graph.input_index(f"L{layer}.KV{head // graph.group_size}.k"),
            graph.input_index(f"L{layer}.KV{head // graph.group_size}.v"),
        ]
        rows.append(
            {
                "head": name,
                "layer": layer,
                "in_circuit": (layer, head) in circuit.heads,
                "reference": (layer, head) in reference,
                "edges_out": int(mask[i].sum()),
                "edges_in": int(mask[:, cols].sum()),
                "score_out": float(weight[i].sum()),
                "attention_to_name": float(attention[layer, head]),
            }
        )
    return pd.DataFrame(rows)


def mlp_positions(model, pairs: StudyPairs, layers: list[int]) -> pd.DataFrame:
    """Where each MLP's output carries the metric: attribution patching of ``hook_mlp_out`` by position, pair by
    pair, summed by the position's role as shares of the layer's total ``|attribution|``. Roles: the
    antecedent's tokens (``name``), the token after it (``next``: the verb in most prompts), the others up to
    the read position (``between``) and the read position (``final``). Positions before the antecedent are the
    same in both twins and carry nothing."""
    roles = ("name", "next", "between", "final")
    if not layers:
        return pd.DataFrame(columns=["mlp", *roles])
    totals = {layer: dict.fromkeys(roles, 0.0) for layer in layers}
    hooks = [f"blocks.{layer}.hook_mlp_out" for layer in layers]
    for i in range(len(pairs)):
        one = pairs.pairs[i : i + 1].to(model.device)
        read, last = int(one.read_positions()[0]), pairs.names[i][-1]
        frame = attribution_patch(
            model,
            one.clean,
            one.corrupt,
            lambda logits, batch, one=one: logit_difference(logits, one),  # the pair's own read position
            hooks,
            by="position",
            attention_mask=one.attention_mask,
        )
        for row in frame.itertuples():
            p = int(row.position)
            if p in pairs.names[i]:
                role = "name"
            elif p == read:
                role = "final"
            elif p == last + 1:
                role = "next"
            elif last < p < read:
                role = "between"
            else:
                continue
            totals[int(row.layer)][role] += abs(float(row.delta))
    rows = []
    for layer, parts in totals.items():
        whole = sum(parts.values()) or float("nan")
        rows.append({"mlp": f"L{layer}.MLP", **{k: v / whole for k, v in parts.items()}})
    return pd.DataFrame(rows)
