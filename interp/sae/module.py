"""SAE: a sparse dictionary as a module, with SAELens's hook points on its input, latents and output.

``encode`` and ``decode`` follow SAELens's inference code step by step (input normalisation, ``b_dec``
subtracted where the config says so, the activation, the decoder), so a dictionary loaded from any format
computes what its own library computes. A TopK code is decoded from its k active latents, and formed densely
only when something reads it (:mod:`interp.sae.latents`). The hook points are :class:`hooks.HookPoint` s:
standalone, ``sae.run_with_cache(x)`` caches them; spliced into a model (``model.saes([sae])``) they are listed
under the model's names, ``HOOK.hook_sae_acts_post`` and so on.
"""

from __future__ import annotations

from dataclasses import dataclass

import einops
import torch
from torch import nn

from hooks import HookedModule, HookPoint
from interp.sae.activation import activate, top_k
from interp.sae.config import SAEConfig
from interp.sae.latents import Active, Code, Latents, Run, through_post

INFERENCE = {"standard": "relu", "jumprelu": "jumprelu", "topk": "topk", "batchtopk": "jumprelu"}
"""Architecture -> the activation run at inference (BatchTopK: the threshold learned in training)."""

SAE_HOOKS = (
    "hook_sae_input",
    "hook_sae_acts_pre",
    "hook_sae_acts_post",
    "hook_sae_recons",
    "hook_sae_error",
    "hook_sae_output",
)
"""The hook points of a spliced SAE, in the order a forward pass reaches them (SAELens's names)."""


@dataclass(frozen=True)
class _Context:
    """What decoding needs from the input: its shape, the normalised input (skip) and normalisation stats."""

    shape: torch.Size
    sae_in: torch.Tensor | None
    stats: tuple[torch.Tensor, ...]


class SAE(HookedModule):
    """A sparse autoencoder (or transcoder) with SAELens's parameters and hooks.

    Attributes:
        cfg: the :class:`SAEConfig`.
        W_enc: ``[d_in, d_sae]``; b_enc: ``[d_sae]``; W_dec: ``[d_sae, d_out]``; b_dec: ``[d_out]``.
        threshold: ``[d_sae]`` for JumpReLU and BatchTopK.
        W_skip: ``[d_out, d_in]`` when ``cfg.skip``.

    >>> sae = SAE(SAEConfig(d_in=4, d_sae=8, architecture="topk", k=2))
    >>> sae.encode(torch.randn(3, 4)).ne(0).sum(-1).tolist()
    [2, 2, 2]
    """

    rectify = True
    """TopK and JumpReLU pass the values they keep through a ReLU, as SAELens, sparsify and Gemma Scope do
    (:mod:`interp.sae.activation`)."""

    def __init__(self, cfg: SAEConfig) -> None:
        super().__init__()
        if not isinstance(cfg, SAEConfig):
            raise TypeError(f"SAE needs an SAEConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        dtype = getattr(torch, cfg.dtype)
        d_in, d_sae, d_out = cfg.d_in, cfg.d_sae, cfg.width_out
        self.W_enc = nn.Parameter(torch.zeros(d_in, d_sae, dtype=dtype))
        self.b_enc = nn.Parameter(torch.zeros(d_sae, dtype=dtype))
        self.W_dec = nn.Parameter(torch.zeros(d_sae, d_out, dtype=dtype))
        self.b_dec = nn.Parameter(torch.zeros(d_out, dtype=dtype))
        if cfg.has_threshold:
            self.threshold = nn.Parameter(torch.zeros(d_sae, dtype=dtype))
        if cfg.skip:
            self.W_skip = nn.Parameter(torch.zeros(d_out, d_in, dtype=dtype))
        if cfg.finetuning_scaling_factor:
            self.finetuning_scaling_factor = nn.Parameter(torch.ones(d_sae, dtype=dtype))
        for name in SAE_HOOKS:
            setattr(self, name, HookPoint())
        self.setup_hooks()

    # -- shapes -------------------------------------------------------------------------------------------

    @property
    def d_in(self) -> int:
        return self.cfg.d_in

    @property
    def d_sae(self) -> int:
        return self.cfg.d_sae

    @property
    def d_out(self) -> int:
        return self.cfg.width_out

    @property
    def hook_name(self) -> str | None:
        return self.cfg.hook_name

    @property
    def hook_name_out(self) -> str | None:
        """The hook the output replaces: ``hook_name_out`` for a transcoder, else ``hook_name``."""
        return self.cfg.hook_name_out if self.cfg.transcoder else self.cfg.hook_name

    @property
    def device(self) -> torch.device:
        return self.W_enc.device

    @property
    def metadata(self) -> dict:
        """What the files recorded and training adds (``metadata["training"]``): ``cfg.metadata``, named as a
        transcoder's is."""
        return self.cfg.metadata

    @property
    def dtype(self) -> torch.dtype:
        return self.W_enc.dtype

    def extra_repr(self) -> str:
        c = self.cfg
        k = f", k={c.k}" if c.k is not None else ""
        return f"{c.architecture}{k}, d_in={c.d_in}, d_sae={c.d_sae}, hook_name={c.hook_name!r}"

    # -- the computation ----------------------------------------------------------------------------------

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent activations ``[..., d_sae]`` of inputs ``[..., d_in]`` (``[..., head, d_head]`` for hook_z)."""
        return self._encode(x, Run(hooked=True))[0].to_dense(self.d_sae)

    def decode(self, acts: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The output ``[..., d_out]`` (the input's shape for hook_z) written by latents ``acts``.

        Args:
            acts: ``[..., d_sae]``.
            x: the input that was encoded; needed only when the output undoes a per-input normalisation
                (``constant_norm_rescale``, ``layer_norm``), adds a skip connection, or is reshaped back to
                heads (hook_z).
        """
        ctx = None if x is None else self._prepare(x, Run(hooked=False))[1]
        return self._decode(Latents(dense=acts), ctx, Run(hooked=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The reconstruction (an autoencoder) or prediction (a transcoder) of ``x``."""
        return self.hook_sae_output(self.output(x)[0])

    def reconstruct(self, x: torch.Tensor, *, hooked: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """``(acts, output)`` for inputs ``x``; ``hooked=False`` bypasses the hook points (the clean path)."""
        run = Run(hooked=hooked)
        latents, ctx = self._encode(x, run)
        return latents.to_dense(self.d_sae), self._decode(latents, ctx, run)

    def output(
        self, x: torch.Tensor, *, hooked: bool = True, dense: bool = False
    ) -> tuple[torch.Tensor, Run]:
        """The output for inputs ``x``, forming the dense latents only when a hook reads them, and the
        :class:`~interp.sae.latents.Run`: whether a hook changed a tensor on the way, and whether the code was
        decoded densely.

        The splice's error term needs the output of the clean path (``hooked=False``) too: when no hook changed
        anything it is the hooked output itself; otherwise ``dense=run.dense`` decodes it the way the hooked
        pass did, so the two are the same bits wherever the hooks changed nothing.
        """
        run = Run(hooked=hooked, dense=dense)
        code = self.hooked_encode(x, run)
        return self.hooked_decode(code, run), run

    def hooked_encode(self, x: torch.Tensor, run: Run) -> Code:
        """The code of inputs ``x`` through the input and latent hook points (past them unless ``run.hooked``):
        the first half of :meth:`output`, which a splice runs when the forward reaches the input hook."""
        latents, ctx = self._encode(x, run)
        return Code(latents, ctx)

    def hooked_decode(self, code: Code, run: Run) -> torch.Tensor:
        """The output of ``code`` through ``hook_sae_recons`` (past it unless ``run.hooked``): the second half of
        :meth:`output`, which a splice runs at the output hook."""
        return self._decode(code.latents, code.context, run)

    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """Encoder pre-activations ``[..., d_sae]`` (what TopK ranks and JumpReLU thresholds), no hooks."""
        return self._pre(self._prepare(x, Run(hooked=False))[0])

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        """The activation function on pre-activations ``[..., d_sae]`` (:mod:`interp.sae.activation`)."""
        threshold = self.threshold if self.cfg.has_threshold else None
        return activate(
            pre, INFERENCE[self.cfg.architecture], rectify=self.rectify, k=self.cfg.k, threshold=threshold
        )

    def _prepare(self, x: torch.Tensor, run: Run) -> tuple[torch.Tensor, _Context]:
        shape = x.shape
        x = x.to(self.dtype)
        if self.cfg.reshape_activations == "hook_z":
            x = einops.rearrange(x, "... head d_head -> ... (head d_head)")
        if x.shape[-1] != self.d_in:
            raise ValueError(
                f"the SAE for {self.cfg.hook_name!r} reads d_in={self.d_in} features, but the input has "
                f"{x.shape[-1]} (shape {tuple(shape)}); load the SAE that matches this hook and model"
            )
        sae_in = run(self.hook_sae_input, x)
        stats: tuple[torch.Tensor, ...] = ()
        mode = self.cfg.normalize_activations
        if mode == "constant_norm_rescale":
            coeff = (self.d_in**0.5) / sae_in.norm(dim=-1, keepdim=True)
            sae_in, stats = sae_in * coeff, (coeff,)
        elif mode == "layer_norm":
            mu = sae_in.mean(dim=-1, keepdim=True)
            centred = sae_in - mu
            std = centred.std(dim=-1, keepdim=True)
            sae_in, stats = centred / (std + 1e-5), (mu, std)
        ctx = _Context(shape, sae_in if self.cfg.skip else None, stats)
        if self.cfg.apply_b_dec_to_input:
            sae_in = sae_in - self.b_dec
        return sae_in, ctx

    def _pre(self, sae_in: torch.Tensor) -> torch.Tensor:
        pre = sae_in @ self.W_enc + self.b_enc  # [..., d_sae]
        if self.cfg.rescale_acts_by_decoder_norm:
            pre = pre * self.W_dec.norm(dim=-1)
        return pre

    def _encode(self, x: torch.Tensor, run: Run) -> tuple[Latents, _Context]:
        sae_in, ctx = self._prepare(x, run)
        pre = run(self.hook_sae_acts_pre, self._pre(sae_in))
        if self.cfg.architecture == "topk":
            active = top_k(pre, self.cfg.k, rectify=self.rectify)
            return through_post(self.hook_sae_acts_post, active, self.d_sae, run), ctx
        return Latents(dense=run(self.hook_sae_acts_post, self.activate(pre))), ctx

    def _decode(self, latents: Latents, ctx: _Context | None, run: Run) -> torch.Tensor:
        if latents.active is not None:
            out = self._decode_active(latents.active.values, latents.active.indices)  # [..., d_out]
        else:
            out = self.decoder_write(latents.dense)  # [..., d_out]
        mode = self.cfg.normalize_activations
        if ctx is None and (self.cfg.skip or mode in ("constant_norm_rescale", "layer_norm")):
            raise ValueError(
                f"decoding this SAE (normalize_activations={mode!r}, skip={self.cfg.skip}) needs the "
                "encoded input: call decode(acts, x)"
            )
        normalised = mode in ("constant_norm_rescale", "layer_norm")
        if normalised:  # SAELens hooks the reconstruction before the input's normalisation is undone
            out = run(self.hook_sae_recons, out)
        if mode == "constant_norm_rescale":
            out = out / ctx.stats[0]
        elif mode == "layer_norm":
            out = out * ctx.stats[1] + ctx.stats[0]
        if self.cfg.skip:
            out = out + ctx.sae_in @ self.W_skip.T
        if not normalised:
            out = run(self.hook_sae_recons, out)
        if self.cfg.reshape_activations == "hook_z" and ctx is not None:
            out = out.reshape(ctx.shape)  # [..., head, d_head]
        return out

    def decoder_write(self, acts: torch.Tensor) -> torch.Tensor:
        """``acts @ W_dec + b_dec`` ``[..., d_out]`` for latents ``[..., d_sae]`` (divided by the decoder norms and
        scaled by ``finetuning_scaling_factor`` where the config says so): the output before a per-input
        normalisation is undone and without the skip term."""
        acts = acts.to(self.dtype)
        if self.cfg.rescale_acts_by_decoder_norm:
            acts = acts / self.W_dec.norm(dim=-1)
        if self.cfg.finetuning_scaling_factor:
            acts = acts * self.finetuning_scaling_factor
        return acts @ self.W_dec + self.b_dec  # [..., d_out]

    def skip_write(self, x: torch.Tensor) -> torch.Tensor:
        """The skip connection's write ``[..., d_out]`` for inputs ``x`` (``cfg.skip``)."""
        return self._prepare(x, Run(hooked=False))[1].sae_in @ self.W_skip.T

    def _decode_active(self, values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """The dense decode's ``acts @ W_dec + b_dec`` from the k active latents (``[..., k]``) alone."""
        if self.cfg.rescale_acts_by_decoder_norm:
            values = values / self.W_dec.norm(dim=-1)[indices]
        if self.cfg.finetuning_scaling_factor:
            values = values * self.finetuning_scaling_factor[indices]
        return Active(values, indices).decode(self.W_dec) + self.b_dec  # [..., d_out]

    # -- conversions --------------------------------------------------------------------------------------

    @torch.no_grad()
    def fold_activation_scale(self, scale_in: float, scale_out: float | None = None) -> SAE:
        """Fold constant scales into the weights: trained to map ``x * scale_in`` to ``y * scale_out``, it then
        maps ``x`` to ``y``, with latents divided by ``scale_in``, TopK choosing the same latents, and the
        decoder rows of an autoencoder keeping their norms.

        Args:
            scale_in: the factor the inputs were multiplied by in training.
            scale_out: the factor the targets were multiplied by (default ``scale_in``: an autoencoder).
        """
        scale_out = scale_in if scale_out is None else scale_out
        if self.cfg.apply_b_dec_to_input and scale_in != scale_out:
            raise ValueError("apply_b_dec_to_input needs one scale for input and output")
        self.b_enc.div_(scale_in)
        if self.cfg.has_threshold:
            self.threshold.div_(scale_in)
        self.W_dec.mul_(scale_in / scale_out)
        self.b_dec.div_(scale_out)
        if self.cfg.skip:
            self.W_skip.mul_(scale_in / scale_out)
        return self
