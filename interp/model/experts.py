"""Routed experts: each expert runs on the tokens routed to it and on no others.

A layer's experts are stacked, ``W_gate``, ``W_in``: ``[n_experts, d_model, d_expert]`` and ``W_out``:
``[n_experts, d_expert, d_model]``, each expert's matrix stored in ``nn.Linear``'s ``[out, in]`` order
(:mod:`interp.model.layout`), so one expert's weights are one contiguous block, held once. The (token, expert)
assignments are sorted by expert, stably, so that expert ``e``'s rows are the tokens routed to it in the
order of their flat index ``batch * pos + p``; each expert then multiplies one contiguous slice of rows
(``torch.nn.functional.grouped_mm`` does all experts in one call where it can; a loop over the experts that
received tokens otherwise). Each row is multiplied by its routing weight (on the grouped path, unless
``W_out`` has a bias, before ``W_out``, where the row is narrower: the product is linear), and the rows go back
to token order and sum over each token's ``k`` choices, in the order of its choices.

Per-expert hook points (``experts.E.hook_gate``, ``hook_pre``, ``hook_post``, ``hook_out``) see expert ``E``'s
rows only, ``[n_routed_to_E, width]``. When one of them is hooked the experts run one by one, each point called
in turn, every expert included: an expert that received no tokens calls its hooks with zero rows, so a cache
holds ``[0, width]`` for it rather than nothing. :func:`expert_tokens` gives the ``(batch, pos)`` of each row.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hooks import HookPoint, listeners, listening
from interp.config import TransformerConfig
from interp.model.layout import param_in_layout
from interp.model.mlp import ACTIVATIONS


class ExpertHooks(nn.Module):
    """The hook points of one routed expert, on its own rows: ``hook_gate`` (gated experts: the gate
    projection), ``hook_pre`` (the up projection, or the pre-activation of an ungated expert), ``hook_post``
    (after the nonlinearity and the product) ``[n_routed, d_expert]``, and ``hook_out`` (the expert's output
    before its routing weight multiplies it) ``[n_routed, d_model]``. TransformerLens's names for Mixtral's
    experts, plus ``hook_out``."""

    def __init__(self, gated: bool) -> None:
        super().__init__()
        if gated:
            self.hook_gate = HookPoint()
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()
        self.hook_out = HookPoint()


class RoutedExperts(nn.Module):
    """The stacked weights of a layer's routed experts and the computation over them. A subclass
    (:class:`~interp.model.moe.MoE`, with the router and the shared expert) gives them their hook points,
    ``self.experts = self._expert_hooks(n_experts, gated)``, after its own routing hooks, in forward order."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        n, d, m = cfg.n_experts, cfg.d_model, cfg.d_expert
        self.n_experts = n
        self.gated = cfg.mlp == "gated"
        self.act = ACTIVATIONS[cfg.act]
        self.clamp = cfg.glu_clamp
        self.W_gate = param_in_layout((n, d, m), (0, 2, 1)) if self.gated else None
        self.W_in = param_in_layout((n, d, m), (0, 2, 1))
        self.W_out = param_in_layout((n, m, d), (0, 2, 1))
        bias = (lambda *shape: nn.Parameter(torch.zeros(shape))) if cfg.mlp_bias else (lambda *shape: None)
        self.b_gate = bias(n, m) if self.gated else None
        self.b_in = bias(n, m)
        self.b_out = bias(n, d)

    def _expert_hooks(self, n: int, gated: bool) -> nn.ModuleList:
        """``n`` experts' hook points, and what makes any of them listen, gathered once
        (:func:`hooks.listeners`), so that one test per forward pass tells whether any expert's point
        would run a function."""
        hooks = nn.ModuleList(ExpertHooks(gated) for _ in range(n))
        self._listeners = listeners(p for p in hooks.modules() if isinstance(p, HookPoint))
        return hooks

    def experts_hooked(self) -> bool:
        """Whether any expert's hook point would run a function (:func:`hooks.listening`)."""
        return listening(self._listeners)

    def run_experts(self, x: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Each token through its chosen experts, weighted and summed.

        Args:
            x: ``[tokens, d_model]``.
            indices: ``[tokens, k]`` the chosen experts.
            weights: ``[tokens, k]`` their weights.

        Returns:
            ``[tokens, d_model]``.
        """
        tokens, k = indices.shape
        chosen = indices.reshape(-1)  # [tokens * k]
        by_expert, order = torch.sort(chosen, stable=True)  # assignments grouped by expert, tokens ascending
        rows = x[order // k]  # [tokens * k, d_model], expert-major
        row_weights = weights.reshape(-1)[order, None]  # [tokens * k, 1]
        counts = torch.bincount(by_expert, minlength=self.n_experts)  # [n_experts]
        hooked = self.experts_hooked()
        if not hooked and _grouped_mm_fits(rows, self._matrices()):
            out = self._grouped(rows, counts, row_weights)
        else:
            out = self._one_by_one(rows, counts.tolist(), hooked) * row_weights
        unsorted = torch.empty_like(out)
        unsorted[order] = out  # back to (token, choice) order
        return unsorted.view(tokens, k, -1).sum(1)  # [tokens, d_model]

    def _matrices(self) -> list[torch.Tensor]:
        return [w for w in (self.W_gate, self.W_in, self.W_out) if w is not None]

    def _grouped(self, rows: torch.Tensor, counts: torch.Tensor, row_weights: torch.Tensor) -> torch.Tensor:
        """Every expert in one grouped product per matrix, weighted (no hooks, no gradient: in place)."""
        offsets = counts.cumsum(0).to(torch.int32)  # where each expert's rows end
        biased = any(b is not None for b in (self.b_gate, self.b_in, self.b_out))
        by_expert = torch.repeat_interleave(counts) if biased else None  # [rows] the expert of each row

        def affine(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
            out = F.grouped_mm(h, w, offs=offsets)
            return out if b is None else out.add_(b[by_expert])

        hidden = affine(rows, self.W_in, self.b_in)  # [rows, d_expert]
        if self.gated:
            hidden = self._glu(affine(rows, self.W_gate, self.b_gate), hidden, in_place=True)
        else:
            hidden = self.act(hidden)
        if self.b_out is None:  # the weight is a scalar per row: it goes on the narrower side of W_out
            return affine(hidden.mul_(row_weights), self.W_out, None)
        return affine(hidden, self.W_out, self.b_out).mul_(row_weights)

    def _glu(self, gate: torch.Tensor, up: torch.Tensor, *, in_place: bool) -> torch.Tensor:
        """``act(gate) * up``, or GPT-OSS's clamped unit ``act(min(gate, c)) * (clamp(up, -c, c) + 1)``."""
        if self.clamp is not None:
            c = self.clamp
            return self.act(gate.clamp(max=c)) * (up.clamp(-c, c) + 1)
        return up.mul_(self.act(gate)) if in_place else self.act(gate) * up

    def _one_by_one(self, rows: torch.Tensor, counts: list[int], hooked: bool) -> torch.Tensor:
        """Expert after expert on its slice of rows, calling its hook points (every expert's when ``hooked``)."""
        pieces = []
        start = 0
        for e, n in enumerate(counts):
            if n == 0 and not hooked:
                continue
            h = rows[start : start + n]  # [n, d_model]
            start += n
            points = self.experts[e]
            up = _affine(h, self.W_in[e], self.b_in, e)
            if self.gated:
                gate = _affine(h, self.W_gate[e], self.b_gate, e)
                if hooked:
                    gate, up = points.hook_gate(gate), points.hook_pre(up)
                hidden = self._glu(gate, up, in_place=False)
            else:
                hidden = self.act(points.hook_pre(up) if hooked else up)
            if hooked:
                hidden = points.hook_post(hidden)
            out = _affine(hidden, self.W_out[e], self.b_out, e)
            pieces.append(points.hook_out(out) if hooked else out)
        if not pieces:
            return rows.new_zeros(0, rows.shape[-1])
        return torch.cat(pieces)


def _affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, expert: int) -> torch.Tensor:
    out = x @ w  # w: one expert's [in, out], a transposed view of its stored rows
    return out if b is None else out + b[expert]


def _grouped_mm_fits(rows: torch.Tensor, weights: list[torch.Tensor]) -> bool:
    """Whether ``grouped_mm`` can run these products: inference only (its backward is not used), the dtypes
    and 16-byte alignment its kernels require, on the CPU or a CUDA device of compute capability 8 or more."""
    if not hasattr(F, "grouped_mm") or rows.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return False
    if torch.is_grad_enabled() and (rows.requires_grad or any(w.requires_grad for w in weights)):
        return False
    if rows.device.type == "cuda":
        if torch.cuda.get_device_capability(rows.device) < (8, 0):
            return False
    elif rows.device.type != "cpu":
        return False
    size = rows.element_size()
    for t in (rows, *weights):
        if t.dtype != rows.dtype or t.data_ptr() % 16 or any(s * size % 16 for s in t.stride() if s != 1):
            return False
    return True


def expert_tokens(expert_indices: torch.Tensor, expert: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(batch, pos)`` of the rows of expert ``expert``'s hooks, in their order.

    Args:
        expert_indices: a layer's ``mlp.hook_expert_indices``, ``[batch, pos, k]``.
        expert: the expert.

    Returns:
        Two ``[n_routed]`` tensors: the batch and the position of row ``i`` of ``experts.E.hook_*``.

    >>> indices = torch.tensor([[[0, 2], [1, 0], [2, 1]]])  # one sequence of three tokens, top 2 of 3
    >>> expert_tokens(indices, 0)
    (tensor([0, 0]), tensor([0, 1]))
    """
    batch, pos, _ = (expert_indices == expert).nonzero(as_tuple=True)  # row-major: flat token order
    return batch, pos
