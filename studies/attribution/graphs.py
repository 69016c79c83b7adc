"""One attribution graph per prompt and what it says: scores, the top features by influence on the target, by
position, and where the graph's influence sits among the prompt's words.

Every graph has three targets: the logit difference ``a - b`` (weight 1, so influence, pruning and the scores
are about it alone) and the two tokens ``a`` and ``b`` (weight 0), whose rows give the head loadings of the
difference (loadings are linear in the target: those of ``a`` minus those of ``b``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from interp.circuits.features import AttributionGraph, Target, attribute
from interp.circuits.features.targets import token_id
from studies.attribution.prompts import Prompt


@dataclass(frozen=True)
class GraphSettings:
    """How each graph is drawn and read."""

    max_feature_nodes: int
    batch_size: int
    top: int  # features ablated and listed


def targets_of(model: Any, prompt: Prompt) -> list[Target]:
    """The difference target and its two tokens (weight 0), in that order: ``logit.0``, ``logit.1``, ``logit.2``."""
    a, b = prompt.target
    w_u = model.unembed.weight.detach().float()  # [d_model, d_vocab]
    mean = w_u.mean(1)
    tokens = [
        Target(text, w_u[:, i] - mean, 0.0, i) for text, i in ((t, token_id(model, t)) for t in prompt.target)
    ]
    return [Target.difference(model, a, b), *tokens]


def draw(model: Any, tc: Any, prompt: Prompt, settings: GraphSettings, progress: bool) -> AttributionGraph:
    """The attribution graph of ``prompt`` for its targets."""
    return attribute(
        model,
        tc,
        prompt.tokens,
        targets=targets_of(model, prompt),
        max_feature_nodes=settings.max_feature_nodes,
        batch_size=settings.batch_size,
        progress=progress,
    )


def role_of(prompt: Prompt, position: int) -> str:
    """The word a position belongs to (``other`` when none)."""
    for role, positions in prompt.roles.items():
        if position in positions:
            return role
    return "other"


def feature_table(graph: AttributionGraph, prompt: Prompt) -> pd.DataFrame:
    """Every feature node (its row in the graph), layer, position, role, feature, activation, influence on the
    target and its direct edge to the target, ranked by influence."""
    n = graph.n_features
    influence = graph.influence()[:n].float()
    direct = graph.adjacency[n + graph.n_errors + graph.n_pos, :n].float()  # the row of logit.0
    layer, position, feature = graph.features.T.tolist() if n else ([], [], [])
    frame = pd.DataFrame(
        {
            "node": list(range(n)),
            "layer": layer,
            "position": position,
            "role": [role_of(prompt, p) for p in position],
            "feature": feature,
            "activation": graph.activations[:n].float().tolist(),
            "influence": influence.tolist(),
            "direct_edge": direct.tolist(),
        }
    )
    return frame.sort_values("influence", ascending=False, kind="stable").reset_index(drop=True)


def summary(graph: AttributionGraph, prompt: Prompt, features: pd.DataFrame) -> dict:
    """The graph's scores and how its feature influence is spread over the prompt's words."""
    replacement, completeness = graph.scores()
    total = float(features["influence"].sum())
    shares = features.groupby("role")["influence"].sum() / total if total > 0 else pd.Series(dtype=float)
    errors = graph.influence()[graph.n_features : graph.n_features + graph.n_errors]
    tokens = graph.influence()[
        graph.n_features + graph.n_errors : graph.n_features + graph.n_errors + graph.n_pos
    ]
    return {
        "prompt": prompt.name,
        "schema": prompt.schema,
        "n_tokens": graph.n_pos,
        "n_features": graph.n_features,
        "replacement_score": float(replacement),
        "completeness_score": float(completeness),
        "influence_features": total,
        "influence_errors": float(errors.sum()),
        "influence_tokens": float(tokens.sum()),
        "role_shares": {str(k): float(v) for k, v in shares.items()},
    }


def top_by_role(features: pd.DataFrame, per_role: int) -> pd.DataFrame:
    """The ``per_role`` most influential features at each word."""
    return features.groupby("role", sort=False).head(per_role).reset_index(drop=True)


def edge_sum(graph: AttributionGraph, rows: list[int], target_row: int) -> float:
    """The sum of the direct edges from the feature nodes ``rows`` to the node ``target_row``."""
    return float(graph.adjacency[target_row, torch.tensor(rows, dtype=torch.long)].sum()) if rows else 0.0
