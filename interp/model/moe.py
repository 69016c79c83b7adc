"""The mixture-of-experts MLP: a router picks ``k`` experts per token; only they run on it.

``x`` is the normed stream ``[batch, pos, d_model]``. The router's logits are ``x @ W_router (+ b_router)``,
``[batch, pos, n_experts]``; the experts chosen are the top ``k`` of their softmax (in float32), and their
weights are that softmax at the chosen experts, renormalised to sum to 1 over them when
``cfg.expert_weights == "softmax_topk"`` (then they equal a softmax over the chosen logits). Each token's
output is the weighted sum of its chosen experts' outputs (:mod:`interp.model.experts`), plus, where the
family has one, a shared expert's output on every token, multiplied by ``sigmoid(x @ W_shared_gate)``
(Qwen2-MoE). The block adds the whole, ``hook_mlp_out``, to the stream as it adds a dense MLP's.

Hooks (names within ``blocks.L.mlp``; TransformerLens's where it has them):

- ``hook_router_logits`` ``[batch, pos, n_experts]``: an edit changes which experts are chosen and their weights
  (a large logit forces an expert in, ``-inf`` keeps it out);
- ``hook_expert_indices`` ``[batch, pos, k]`` (int64): the chosen experts, by descending weight; an edit
  replaces the choice, and the weights are then read from the softmax at the experts given;
- ``hook_expert_weights`` ``[batch, pos, k]``: the weight of each chosen expert's output;
- ``experts.E.hook_gate``, ``hook_pre``, ``hook_post`` ``[n_routed_to_E, d_expert]`` and ``hook_out``
  ``[n_routed_to_E, d_model]``: expert ``E`` on its own tokens (:func:`~interp.model.experts.expert_tokens`);
- ``shared_expert.hook_gate``, ``hook_pre``, ``hook_post`` ``[batch, pos, d_shared_expert]`` and ``hook_out``
  ``[batch, pos, d_model]``, and ``hook_shared_expert_weight`` ``[batch, pos, 1]``, the sigmoid gate.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig
from interp.model.experts import RoutedExperts, expert_tokens
from interp.model.layout import param_in_layout
from interp.model.mlp import ACTIVATIONS

__all__ = ["MoE", "SharedExpert", "expert_tokens"]


class MoE(RoutedExperts):
    """The mixture-of-experts MLP of one layer (see the module docstring for its hooks)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__(cfg)
        self.k = cfg.experts_per_token
        self.renormalize = cfg.expert_weights == "softmax_topk"
        self.W_router = param_in_layout((cfg.d_model, cfg.n_experts), (1, 0))
        self.b_router = nn.Parameter(torch.zeros(cfg.n_experts)) if cfg.router_bias else None
        # Registered in the order the forward pass reaches them, which is the order of hook_names().
        self.hook_router_logits = HookPoint()  # [batch, pos, n_experts]
        self.hook_expert_indices = HookPoint()  # [batch, pos, k]
        self.hook_expert_weights = HookPoint()  # [batch, pos, k]
        self.experts = self._expert_hooks(cfg.n_experts, self.gated)
        self.shared_expert = SharedExpert(cfg) if cfg.d_shared_expert is not None else None
        self.W_shared_gate = param_in_layout((cfg.d_model, 1), (1, 0)) if cfg.shared_expert_gate else None
        self.b_shared_gate = None  # the gate has no bias; folding a LayerNorm's bias would give it one
        if cfg.shared_expert_gate:
            self.hook_shared_expert_weight = HookPoint()  # [batch, pos, 1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, pos, d = x.shape
        logits = self.hook_router_logits(F.linear(x, self.W_router.T, self.b_router))  # [batch, pos, expert]
        probs = torch.softmax(logits.float(), dim=-1)
        indices = self.hook_expert_indices(probs.topk(self.k, dim=-1).indices)  # [batch, pos, k]
        if not self.hook_expert_indices.idle:
            self._check_indices(indices)
        weights = probs.gather(-1, indices)  # [batch, pos, k]
        if self.renormalize:
            weights = weights / weights.sum(-1, keepdim=True)
        weights = self.hook_expert_weights(weights.to(x.dtype))
        flat = x.reshape(-1, d)  # [tokens, d_model]
        out = self.run_experts(flat, indices.reshape(-1, self.k), weights.reshape(-1, self.k))
        out = out.view(batch, pos, d)
        if self.shared_expert is not None:
            shared = self.shared_expert(x)  # [batch, pos, d_model]
            if self.W_shared_gate is not None:
                gate = torch.sigmoid(F.linear(x, self.W_shared_gate.T, self.b_shared_gate))  # [batch, pos, 1]
                shared = self.hook_shared_expert_weight(gate) * shared
            out = out + shared
        return out

    def _check_indices(self, indices: torch.Tensor) -> None:
        lo, hi = torch.stack(torch.aminmax(indices)).tolist()
        if lo < 0 or hi >= self.n_experts:
            raise ValueError(
                f"{self.hook_expert_indices.name} was edited to hold expert {lo if lo < 0 else hi}, but this "
                f"layer has experts 0 to {self.n_experts - 1}"
            )

    def input_weights(self) -> list[tuple[nn.Module, str, str]]:
        """``(module, weight, bias)`` of every matrix that reads the MLP's input (what a norm folds into)."""
        readers = [(self, "W_router", "b_router"), (self, "W_in", "b_in")]
        if self.gated:
            readers.append((self, "W_gate", "b_gate"))
        if self.shared_expert is not None:
            readers += self.shared_expert.input_weights()
        if self.W_shared_gate is not None:
            readers.append((self, "W_shared_gate", "b_shared_gate"))
        return readers

    def output_weights(self) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
        """``(weight, bias)`` of every matrix that writes the MLP's output into the stream."""
        writers = [(self.W_out, self.b_out)]
        if self.shared_expert is not None:
            writers.append((self.shared_expert.W_out, self.shared_expert.b_out))
        return writers


class SharedExpert(nn.Module):
    """An expert every token goes through (Qwen2-MoE), an MLP of width ``d_shared_expert`` with a routed
    expert's hook names: ``hook_gate``, ``hook_pre``, ``hook_post`` ``[batch, pos, d_shared_expert]`` and
    ``hook_out`` ``[batch, pos, d_model]``."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        d, m = cfg.d_model, cfg.d_shared_expert
        self.gated = cfg.mlp == "gated"
        self.act = ACTIVATIONS[cfg.act]
        self.W_gate = param_in_layout((d, m), (1, 0)) if self.gated else None
        self.W_in = param_in_layout((d, m), (1, 0))
        self.W_out = param_in_layout((m, d), (1, 0))
        bias = (lambda n: nn.Parameter(torch.zeros(n))) if cfg.mlp_bias else (lambda n: None)
        self.b_gate = bias(m) if self.gated else None
        self.b_in = bias(m)
        self.b_out = bias(d)
        if self.gated:
            self.hook_gate = HookPoint()
        self.hook_pre = HookPoint()
        self.hook_post = HookPoint()
        self.hook_out = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            gate = self.hook_gate(F.linear(x, self.W_gate.T, self.b_gate))  # [batch, pos, d_shared_expert]
            hidden = self.act(gate) * self.hook_pre(F.linear(x, self.W_in.T, self.b_in))
        else:
            hidden = self.act(self.hook_pre(F.linear(x, self.W_in.T, self.b_in)))
        return self.hook_out(F.linear(self.hook_post(hidden), self.W_out.T, self.b_out))

    def input_weights(self) -> list[tuple[nn.Module, str, str]]:
        return [(self, "W_in", "b_in")] + ([(self, "W_gate", "b_gate")] if self.gated else [])
