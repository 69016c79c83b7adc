"""QK tracing of a Lorsa feature: why a head attends where it does, in the nodes of the complete replacement
graph.

A Lorsa head ``h`` at query position ``q`` mixes its values by its QK head ``g``'s pattern, whose score for key
``k`` is ``q_vec . k_vec / attn_scale`` with ``q_vec = rotary_q(norm(W_Q[g] x[q] + b_Q[g]))`` and ``k_vec`` the
same with ``W_K``, ``b_K`` at ``k``. In the frozen pass of :mod:`.replacement` the Lorsa's input ``x`` is linear
in the writes of the graph's source nodes (features, errors, tokens), and so is ``W_Q[g] x[q]``: its part from
each node comes from backward passes, one row per query dimension (a cotangent ``W_Q[g][:, j]`` at the query's
position), contracted with each node's write. The per-head RMS norm, where the Lorsa has one, is held at the
prompt's divisor (as the model's own q/k norms are in every graph), and rotary at a position is a rotation, so
both are linear maps applied to every part. What no node writes (biases, the first position's writes, ``b_Q``)
is one more part, ``BIAS``: the whole vector less the nodes' parts. The score is then the sum of the query-part x
key-part matrix, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from interp.circuits.features.replacement import ReplacementRun
from interp.model.positional import apply_rotary


@dataclass(frozen=True)
class LorsaScore:
    """One Lorsa head's scores from ``query`` to every key, split into the graph's source nodes.

    Attributes:
        layer, head, qk_head, query: the head, the QK head whose pattern it mixes by, and the query position.
        query_parts: ``[n_sources + 1, d_qk_head]``: each source node's part of the query vector, then the
            bias part (what no node writes).
        key_parts: ``[query + 1, n_sources + 1, d_qk_head]``: the same for the key vector at each key.
        scale: ``1 / attn_scale``.
        scores: ``[query + 1]``: the Lorsa's own score for each key (``q . k / attn_scale``).
    """

    layer: int
    head: int
    qk_head: int
    query: int
    query_parts: torch.Tensor
    key_parts: torch.Tensor
    scale: float
    scores: torch.Tensor

    def matrix(self, key: int) -> torch.Tensor:
        """``[n_sources + 1, n_sources + 1]``: query-part x key-part terms for ``key``; they sum to
        ``scores[key]``."""
        if not 0 <= key <= self.query:
            raise ValueError(f"key {key} is not one the query at {self.query} attends to (0..{self.query})")
        return self.query_parts.double() @ self.key_parts[key].double().T * self.scale


def lorsa_score(
    frozen: ReplacementRun, lorsa: Any, layer: int, query: int, head: int, batch_size: int = 64
) -> LorsaScore:
    """The score of head ``head`` of the Lorsa at ``layer`` from ``query`` to every earlier key, split into the
    source nodes of ``frozen`` (see the module docstring)."""
    module = lorsa.layer(layer)
    n_pos = frozen.heads.inputs[layer].shape[1]
    if not 0 < query < n_pos:
        raise ValueError(f"query {query} is outside positions 1..{n_pos - 1} (nothing is attributed at 0)")
    if not 0 <= head < module.cfg.n_heads:
        raise ValueError(f"head {head} is outside the layer's {module.cfg.n_heads} heads")
    g = int(lorsa.qk_head(layer, torch.tensor([head])))
    x = frozen.heads.inputs[layer]  # [1, pos, d_model], live
    reads = [(query, module.W_Q[g])] + [(k, module.W_K[g]) for k in range(query + 1)]  # [d_model, e] each
    e = module.cfg.d_qk_head
    rows = [(position, w[:, j]) for position, w in reads for j in range(e)]
    parts = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        cotangent = torch.zeros(len(chunk), *x.shape, dtype=x.dtype, device=x.device)
        for i, (position, vector) in enumerate(chunk):
            cotangent[i, 0, position] = vector.detach().to(x.dtype)
        parts.append(frozen.effects([(x, cotangent)]))
    parts = torch.cat(parts).double().unflatten(0, (query + 2, e)).transpose(1, 2)  # [1 + keys, n_sources, e]
    with torch.no_grad():
        xs = x[0, : query + 1].detach().double()
        whole = torch.cat(
            [
                xs[query : query + 1] @ module.W_Q[g].double() + module.b_Q[g].double(),
                xs @ module.W_K[g].double() + module.b_K[g].double(),
            ]
        )  # [1 + keys, e]: the vectors before the norm and rotary
        gains = [module.q_norm, *[module.k_norm] * (query + 1)] if module.q_norm is not None else None
        at = [query, *range(query + 1)]
        parts_out, whole_out = [], []
        for i, position in enumerate(at):
            part, vector = parts[i], whole[i]
            if gains is not None:  # the divisor held at the prompt's: a linear map
                divisor = (vector.pow(2).mean() + module.cfg.eps).sqrt()
                gain = gains[i][g].double()
                part, vector = part / divisor * gain, vector / divisor * gain
            if module.inv_freq is not None:
                at_position = torch.tensor([[position]], device=x.device)
                cos, sin = (t[0, 0, 0] for t in module.rotary(at_position, torch.float64))
                part, vector = apply_rotary(part, cos, sin), apply_rotary(vector, cos, sin)
            parts_out.append(torch.cat([part, (vector - part.sum(0))[None]]))
            whole_out.append(vector)
        scale = 1.0 / module.cfg.attn_scale
        scores = torch.stack(whole_out[1:]) @ whole_out[0] * scale
    return LorsaScore(
        layer=layer,
        head=head,
        qk_head=g,
        query=query,
        query_parts=parts_out[0],
        key_parts=torch.stack(parts_out[1:]),
        scale=scale,
        scores=scores,
    )
