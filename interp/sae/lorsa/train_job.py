"""What is particular to training a Lorsa layer: its shape from the model's family, its initial weights, and the
finished Lorsa (the trainer's loop, checkpoints and schedule are the ones every dictionary uses).

The positions are the family's, read from the model's config: rotary with its base, rotated dimensions and
scaling (a sliding-window layer of Gemma 3 with its local base), or none; the score scale is the family's where
a QK head is as wide as the model's; a per-head RMS norm on queries and keys where the family has one (Qwen3,
Gemma 3). With ``qk_init="attention"`` (the default where it fits: the Lorsa reads ``ln1.hook_normalized`` and
has a multiple of the model's heads, each as wide) each QK head starts as one of the model's attention heads,
the norm's gain and offset folded into its projections (``n_qk_heads / n_heads`` Lorsa heads per model head,
as llamascopium's ``init_lorsa_with_mhsa`` does), so every pattern is the model's at the start and training
moves it from there; otherwise queries and keys start random. The value reads and output directions start as
random unit vectors, ``b_O`` at the mean output.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from interp.sae.lorsa.by_layer import Lorsa
from interp.sae.lorsa.config import LorsaConfig
from interp.sae.lorsa.layer import LorsaLayer
from interp.sae.lorsa.sequences import SequenceSource
from interp.sae.lorsa.train_step import LorsaStep

OPTIONS = ("n_qk_heads", "d_qk_head", "context", "qk_init")
"""The settings a Lorsa run takes beyond every run's (:class:`~interp.sae.training.TrainSettings`)."""
ACTIVATIONS = {"topk": "topk", "batchtopk": "batchtopk", "standard": "relu", "jumprelu": "jumprelu"}


def family_config(model_cfg: Any, layer: int, **fields: Any) -> LorsaConfig:
    """A :class:`LorsaConfig` with the positions, score scale and q/k norm of ``model_cfg``'s layer ``layer``;
    ``fields`` give the rest (``n_heads``, ``n_qk_heads``, ``d_qk_head``, ``activation``, ``k``, sites)."""
    d_head = model_cfg.d_head
    d_qk = fields["d_qk_head"]
    rotary = model_cfg.positional == "rotary"
    sliding = model_cfg.layer_types is not None and model_cfg.layer_types[layer] == "sliding"
    local = sliding and model_cfg.local_rotary_base is not None
    rotary_dim = model_cfg.rotary_dim if d_qk == d_head else min(model_cfg.rotary_dim, d_qk) // 2 * 2
    return LorsaConfig(
        d_model=model_cfg.d_model,
        positional="rotary" if rotary and rotary_dim else "none",
        rotary_dim=rotary_dim if rotary and rotary_dim else None,
        rotary_base=model_cfg.local_rotary_base if local else model_cfg.rotary_base,
        rotary_scaling=None if local else model_cfg.rotary_scaling,
        n_ctx=model_cfg.n_ctx,
        attn_scale=model_cfg.attn_scale if d_qk == d_head else None,
        qk_norm="rmsnorm" if model_cfg.qk_norm == "head" and model_cfg.norm == "rmsnorm" else "none",
        eps=model_cfg.eps,
        **fields,
    )


class LorsaJob:
    """A Lorsa run: one layer of the model, its attention input to its attention output."""

    desc = "train lorsa"

    def __init__(
        self,
        settings: Any,
        rows: SequenceSource,
        model: Any,
        layer: int,
        sites: tuple[str, str],
        options: dict,
    ) -> None:
        self.s, self.rows, self.model, self.layer, self.sites = settings, rows, model, layer, sites
        cfg = model.cfg
        self.n_qk_heads = options.get("n_qk_heads") or cfg.n_heads
        self.d_qk_head = options.get("d_qk_head") or cfg.d_head
        fits = (
            sites[0] == "ln1.hook_normalized"
            and self.n_qk_heads % cfg.n_heads == 0
            and self.d_qk_head == cfg.d_head
        )
        self.qk_init = options.get("qk_init") or ("attention" if fits else "random")
        if self.qk_init not in ("attention", "random"):
            raise ValueError(f"qk_init={self.qk_init!r}; expected 'attention' or 'random'")
        if self.qk_init == "attention" and not fits:
            raise ValueError(
                f"qk_init='attention' copies the model's heads into QK heads that read ln1.hook_normalized, as many "
                f"as a multiple of n_heads={cfg.n_heads}, each d_head={cfg.d_head} wide; this run has input_site="
                f"{sites[0]!r}, n_qk_heads={self.n_qk_heads}, d_qk_head={self.d_qk_head} (use qk_init='random')"
            )
        if settings.d_sae % self.n_qk_heads:
            raise ValueError(
                f"d_sae={settings.d_sae} heads cannot be shared evenly by n_qk_heads={self.n_qk_heads} QK heads"
            )
        self.label = f"|lorsa|{layer}|{sites[0]}|{sites[1]}|{self.n_qk_heads}|{self.d_qk_head}|{self.qk_init}"

    def n_features(self) -> int:
        return self.s.d_sae

    def batch_scale(self, scale: list[float]) -> torch.Tensor:
        """``[context * 2 * d_model]``: each position's input scale, then its output scale."""
        d = self.rows.d_model
        one = torch.tensor(scale, dtype=torch.float32).repeat_interleave(d)  # [2 * d_model]
        return one.repeat(self.rows.context)

    def start(self, sample: torch.Tensor) -> tuple[LorsaStep, list[float], float]:
        s, d = self.s, self.rows.d_model
        x, y = self.rows.split(sample)  # [sequences, context, d_model]
        for what, t in (("inputs", x), ("outputs", y)):
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"the training {what} hold NaN or infinite values; cache them again")
        scale = [math.sqrt(d) / float(t.norm(dim=-1).mean().clamp(min=1e-12)) for t in (x, y)]
        if not s.normalize:
            scale = [1.0, 1.0]
        y = y[:, s.min_position :].reshape(-1, d) * scale[1]
        variance = float((y - y.mean(0)).pow(2).sum(-1).mean().clamp(min=1e-12))
        cfg = family_config(
            self.model.cfg,
            self.layer,
            n_heads=s.d_sae,
            n_qk_heads=self.n_qk_heads,
            d_qk_head=self.d_qk_head,
            activation=ACTIVATIONS[s.architecture],
            k=s.k if s.architecture in ("topk", "batchtopk") else None,
            input_site=self.sites[0],
            output_site=self.sites[1],
        )
        layer = LorsaLayer(cfg)
        g = torch.Generator().manual_seed(s.seed)
        with torch.no_grad():
            for w in (layer.W_V, layer.W_O):
                w.copy_(torch.randn(w.shape, generator=g))
                w /= w.norm(dim=-1, keepdim=True)
            if s.b_dec_init != "zeros":
                layer.b_O.copy_(y.mean(0))
            if self.qk_init == "attention":
                _copy_attention(layer, self.model, self.layer, scale[0])
            else:
                for w in (layer.W_Q, layer.W_K):
                    # Xavier's uniform bound with torch's fans of a [qk_head, d_model, d_qk_head] tensor, as
                    # llamascopium starts them (xavier_uniform_): fan_in d_model * e, fan_out qk_head * e
                    m, d, e = w.shape
                    bound = math.sqrt(6 / (d * e + m * e))
                    w.copy_(torch.rand(w.shape, generator=g) * 2 * bound - bound)
        return LorsaStep(layer, s, variance, self.rows.split), scale, variance

    @torch.no_grad()
    def finish(self, step: LorsaStep, state: Any, record: dict[str, Any]) -> Lorsa:
        layer = step.module
        if layer.threshold is not None:
            layer.threshold.copy_(step.log_threshold.exp())
        layer.fold_scales(*state.scale)
        training = {**record, "kind": "lorsa", "layer": self.layer, "qk_init": self.qk_init}
        training["context"] = self.rows.context
        return Lorsa({self.layer: layer}, metadata={"format": "interp", "training": training})


@torch.no_grad()
def _copy_attention(layer: LorsaLayer, model: Any, index: int, scale_in: float) -> None:
    """QK head ``j`` of ``layer`` as the model's head ``j // r`` (``r = n_qk_heads / n_heads``), reading the
    normalised stream scaled by ``scale_in``: the norm's gain (and LayerNorm's offset) folded into ``W_Q`` and
    ``b_Q`` (``W_K``, ``b_K`` from the head's key/value head), the model's per-head q/k norm gains copied."""
    block = model.blocks[index]
    attn, norm = block.attn, block.ln1
    cfg = model.cfg
    r = layer.cfg.n_qk_heads // cfg.n_heads
    heads = torch.arange(layer.cfg.n_qk_heads) // r  # the model's query head of each QK head
    kv = heads // cfg.group_size
    gain = norm.gain.to(layer.W_Q.dtype)  # [d_model]
    offset = None if norm.b is None else norm.b.detach().to(layer.W_Q.dtype)
    for ours, bias, weight, b, which in (
        (layer.W_Q, layer.b_Q, attn.W_Q, attn.b_Q, heads),
        (layer.W_K, layer.b_K, attn.W_K, attn.b_K, kv),
    ):
        w = weight.detach()[which].to(ours.dtype)  # [qk_head, d_model, d_head]
        ours.copy_(gain[None, :, None] * w / scale_in)
        extra = torch.zeros_like(bias) if b is None else b.detach()[which].to(bias.dtype)
        if offset is not None:
            extra = extra + torch.einsum("d,mde->me", offset, w)
        bias.copy_(extra)
    if layer.q_norm is not None:
        layer.q_norm.copy_(attn.q_norm.gain.to(layer.q_norm.dtype).expand_as(layer.q_norm))
        layer.k_norm.copy_(attn.k_norm.gain.to(layer.k_norm.dtype).expand_as(layer.k_norm))
