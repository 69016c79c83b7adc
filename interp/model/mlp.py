"""The MLP sublayer: standard (W_out act(W_in x)) or gated (W_out (act(W_gate x) * W_in x))."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hooks import HookPoint
from interp.config import TransformerConfig
from interp.model.layout import param_in_layout

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_quick": lambda x: x * torch.sigmoid(x * 1.702),  # GPT-OSS's experts (swiglu_alpha)
    "relu": F.relu,
    "silu": F.silu,
}


class MLP(nn.Module):
    """Hooks: ``hook_pre`` (the gate projection when gated), ``hook_pre_linear`` (gated: the up projection),
    ``hook_post`` (after the nonlinearity, and the product when gated)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.gated = cfg.mlp == "gated"
        self.act = ACTIVATIONS[cfg.act]
        self.W_in = param_in_layout((cfg.d_model, cfg.d_mlp), (1, 0))
        self.W_gate = param_in_layout((cfg.d_model, cfg.d_mlp), (1, 0)) if self.gated else None
        self.W_out = param_in_layout((cfg.d_mlp, cfg.d_model), (1, 0))
        bias = (lambda n: nn.Parameter(torch.zeros(n))) if cfg.mlp_bias else (lambda n: None)
        self.b_in = bias(cfg.d_mlp)
        self.b_gate = bias(cfg.d_mlp) if self.gated else None
        self.b_out = bias(cfg.d_model)
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp]
        if self.gated:
            self.hook_pre_linear = HookPoint()  # [batch, pos, d_mlp]
        self.hook_post = HookPoint()  # [batch, pos, d_mlp]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            gate = self.hook_pre(_affine(x, self.W_gate, self.b_gate))
            up = self.hook_pre_linear(_affine(x, self.W_in, self.b_in))
            hidden = self.hook_post(self.act(gate) * up)
        else:
            hidden = self.hook_post(self.act(self.hook_pre(_affine(x, self.W_in, self.b_in))))
        return _affine(hidden, self.W_out, self.b_out)

    def input_weights(self) -> list[tuple[nn.Module, str, str]]:
        """``(module, weight, bias)`` of every matrix that reads the MLP's input (what a norm folds into)."""
        return [(self, "W_in", "b_in")] + ([(self, "W_gate", "b_gate")] if self.gated else [])

    def output_weights(self) -> list[tuple[torch.Tensor | None, torch.Tensor | None]]:
        """``(weight, bias)`` of the matrix that writes the MLP's output into the stream."""
        return [(self.W_out, self.b_out)]


def _affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    # F.linear wants [out, in]; w.T is the contiguous nn.Linear-layout storage, so no copy is made.
    return F.linear(x, w.T, b)
