"""Tiny random transcoders on the agreed interface, for the attribution-graph tests, and models to put them on.

``kind``: ``per-layer`` (each layer's features write its own MLP output), ``skip`` (the same plus a linear
skip connection) or ``clt`` (cross-layer: features of layer ``l`` write every output from ``l`` on). Encoder
biases are negative, so about a third of the features are active at a position.
"""

from __future__ import annotations

import torch
from torch import nn

import interp


class TinyTranscoders(nn.Module):
    def __init__(
        self,
        cfg,
        d_transcoder: int = 24,
        kind: str = "per-layer",
        seed: int = 0,
        input_site: str = "ln2.hook_normalized",
    ) -> None:
        super().__init__()
        self.input_site = input_site
        g = torch.Generator().manual_seed(seed)
        n, d, f = cfg.n_layers, cfg.d_model, d_transcoder
        self.n_layers, self.d_model, self.d_transcoder, self.layers = n, d, f, list(range(n))
        self.kind = kind
        self.W_enc = nn.Parameter(torch.randn(n, f, d, generator=g) / d**0.5)
        self.b_enc = nn.Parameter(-0.4 - 0.2 * torch.rand(n, f, generator=g))
        outs = [n - layer if kind == "clt" else 1 for layer in range(n)]
        self.W_dec = nn.ParameterList(
            [nn.Parameter(torch.randn(f, k, d, generator=g) / f**0.5) for k in outs]
        )
        self.b_dec = nn.Parameter(0.1 * torch.randn(n, d, generator=g))
        self.W_skip = (
            nn.Parameter(0.3 * torch.randn(n, d, d, generator=g) / d**0.5) if kind == "skip" else None
        )

    @classmethod
    def from_circuit_tracer(
        cls, cfg, tensors: dict, kind: str, input_site: str, gains=None
    ) -> TinyTranscoders:
        """The transcoders of a golden file (weights named as circuit-tracer holds them, ``tc.W_enc.0``...).
        ``gains [n_layers, d_model]``: the norm gain circuit-tracer's input hook applies after the hook this
        one reads (its ``mlp.hook_in`` is interp's ``ln2.hook_normalized`` times the gain), folded into the
        encoder and the skip connection."""
        n = cfg.n_layers
        if kind == "clt":
            w_enc, b_enc, b_dec = tensors["tc.W_enc"], tensors["tc.b_enc"], tensors["tc.b_dec"]
            w_dec = [tensors[f"tc.W_dec.{i}"] for i in range(n)]
            w_skip = None
        else:
            stack = lambda name: torch.stack([tensors[f"tc.{name}.{i}"] for i in range(n)])  # noqa: E731
            w_enc, b_enc, b_dec = stack("W_enc"), stack("b_enc"), stack("b_dec")
            w_dec = [tensors[f"tc.W_dec.{i}"][:, None] for i in range(n)]
            w_skip = stack("W_skip") if kind == "skip" else None
        if gains is not None:
            w_enc = w_enc * gains[:, None, :]
            w_skip = None if w_skip is None else w_skip * gains[:, None, :]
        tc = cls(
            cfg,
            d_transcoder=w_enc.shape[1],
            kind="clt" if kind == "clt" else "per-layer",
            input_site=input_site,
        )
        with torch.no_grad():
            tc.W_enc.copy_(w_enc)
            tc.b_enc.copy_(b_enc)
            tc.b_dec.copy_(b_dec)
            for p, w in zip(tc.W_dec, w_dec, strict=True):
                p.copy_(w)
        tc.W_skip = None if w_skip is None else nn.Parameter(w_skip.clone())
        return tc

    def input_hook(self, layer: int) -> str:
        return f"blocks.{layer}.{self.input_site}"

    def output_hook(self, layer: int) -> str:
        return f"blocks.{layer}.hook_mlp_out"

    def output_layers(self, layer: int) -> list[int]:
        return list(range(layer, self.n_layers)) if self.kind == "clt" else [layer]

    def encode(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        pre = x.float() @ self.W_enc[layer].T + self.b_enc[layer]  # [..., d_transcoder]
        return pre, torch.relu(pre)

    def decoder(self, layer: int, features: torch.Tensor | None = None) -> torch.Tensor:
        w = self.W_dec[layer]  # [d_transcoder, n_out, d_model]
        return w if features is None else w[features]

    def decode(self, acts: dict[int, torch.Tensor], out_layer: int) -> torch.Tensor:
        out = self.b_dec[out_layer]
        for layer in range(out_layer + 1):
            if out_layer in self.output_layers(layer):
                w = self.W_dec[layer][
                    :, self.output_layers(layer).index(out_layer)
                ]  # [d_transcoder, d_model]
                out = out + acts[layer].float() @ w
        return out

    def skip(self, x: torch.Tensor, layer: int) -> torch.Tensor | None:
        return None if self.W_skip is None else x.float() @ self.W_skip[layer].T

    def reconstruct(self, inputs: dict[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        acts = {layer: self.encode(x, layer)[1] for layer, x in inputs.items()}
        outs = {}
        for layer, x in inputs.items():
            skip = self.skip(x, layer)
            outs[layer] = self.decode(acts, layer) + (0 if skip is None else skip)
        return outs


def input_site(model) -> str:
    """Where an MLP transcoder reads: the MLP's norm output, or the stream where the MLP has no norm before it
    (OLMo 2 normalises the MLP's output instead)."""
    return "ln2.hook_normalized" if "blocks.0.ln2.hook_normalized" in model.hook_dict else "hook_resid_mid"


def family_model(name: str) -> interp.HookedTransformer:
    """A tiny random model of a family interp loads: ``gpt2`` or a name of ``tests.load.families.FAMILIES``."""
    if name == "gpt2":
        from tests.hf_models import gpt2

        torch.manual_seed(0)
        hf = gpt2("eager")
        from tests.load.families import embolden

        embolden(hf)
    else:
        from tests.load.families import build

        hf = build(name, vocab=97)
    return interp.from_hf(hf.eval()).eval()
