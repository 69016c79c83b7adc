"""SAEConfig: what a sparse dictionary is, independent of the file format it came in.

The fields follow SAELens's names where SAELens has one (``d_in``, ``d_sae``, ``apply_b_dec_to_input``,
``normalize_activations``, ``rescale_acts_by_decoder_norm``, ``reshape_activations``), so a config read from a
SAELens folder and written back keeps its meaning. A transcoder is a dictionary whose decoder writes another
hook (``hook_name_out``) of width ``d_out``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Architecture = Literal["standard", "jumprelu", "topk", "batchtopk"]
Normalize = Literal["none", "expected_average_only_in", "constant_norm_rescale", "layer_norm"]

ARCHITECTURES = ("standard", "jumprelu", "topk", "batchtopk")
NORMALIZATIONS = ("none", "expected_average_only_in", "constant_norm_rescale", "layer_norm")
DTYPES = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True, kw_only=True)
class SAEConfig:
    """A sparse autoencoder or transcoder.

    Attributes:
        d_in: width of the activation read (``hook_name``).
        d_sae: number of latents (features).
        architecture: ``standard`` (ReLU), ``jumprelu`` (ReLU above a per-latent ``threshold``), ``topk`` (the
            ``k`` largest pre-activations, then ReLU) or ``batchtopk`` (trained with the ``k * batch`` largest
            over a batch; at inference a per-latent threshold, like JumpReLU).
        k: active latents per token for ``topk`` (on average for ``batchtopk``).
        transcoder: the decoder predicts another activation (``hook_name_out``) instead of reconstructing the
            input.
        d_out: width of the activation written; ``None`` means ``d_in``.
        hook_name: the hook read, e.g. ``blocks.3.hook_resid_post``; ``None`` when the file does not say.
        hook_name_out: the hook a transcoder writes (``None`` for an autoencoder, which writes ``hook_name``).
        apply_b_dec_to_input: subtract ``b_dec`` from the input before encoding (SAELens, sparsify SAEs).
        normalize_activations: SAELens's input normalisation: ``constant_norm_rescale`` scales each input to
            norm ``sqrt(d_in)``, ``layer_norm`` centres and divides by the standard deviation (both undone on
            the output); ``expected_average_only_in`` is a constant factor that SAELens folds into the weights.
        rescale_acts_by_decoder_norm: TopK chooses and scales latents by pre-activation times decoder norm.
        reshape_activations: ``hook_z`` flattens ``[..., head, d_head]`` inputs to ``[..., head * d_head]``.
        skip: a linear skip connection ``W_skip [d_out, d_in]`` adds ``x @ W_skip.T`` to the output.
        finetuning_scaling_factor: latents are multiplied by a learned ``finetuning_scaling_factor [d_sae]``
            before decoding (pre-6.0 SAELens).
        dtype: parameter dtype.
        model_name: the model the dictionary was trained on, when known.
        metadata: anything else the file recorded, kept for saving.
    """

    d_in: int
    d_sae: int
    architecture: Architecture = "topk"
    k: int | None = None
    transcoder: bool = False
    d_out: int | None = None
    hook_name: str | None = None
    hook_name_out: str | None = None
    apply_b_dec_to_input: bool = True
    normalize_activations: Normalize = "none"
    rescale_acts_by_decoder_norm: bool = False
    reshape_activations: Literal["none", "hook_z"] = "none"
    skip: bool = False
    finetuning_scaling_factor: bool = False
    dtype: str = "float32"
    model_name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("d_in", "d_sae"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}; it must be a positive integer")
        if self.d_out is not None and (not isinstance(self.d_out, int) or self.d_out < 1):
            raise ValueError(f"d_out={self.d_out!r}; it must be a positive integer or None")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture={self.architecture!r}; expected one of {list(ARCHITECTURES)}")
        if self.normalize_activations not in NORMALIZATIONS:
            raise ValueError(
                f"normalize_activations={self.normalize_activations!r}; expected one of {list(NORMALIZATIONS)}"
            )
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype!r}; expected one of {list(DTYPES)}")
        if self.architecture in ("topk", "batchtopk"):
            if self.k is None or isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
                raise ValueError(
                    f"a {self.architecture} SAE needs k >= 1 latents per token, got k={self.k!r}"
                )
            if self.k > self.d_sae:
                raise ValueError(
                    f"k={self.k} is larger than d_sae={self.d_sae}; a TopK SAE keeps at most d_sae latents"
                )
        if not self.transcoder and (self.hook_name_out is not None or self.width_out != self.d_in):
            raise ValueError(
                f"hook_name_out={self.hook_name_out!r}, d_out={self.d_out!r} describe a transcoder; pass "
                "transcoder=True (an autoencoder writes the hook it reads, with d_out = d_in)"
            )
        if self.transcoder and self.apply_b_dec_to_input:
            raise ValueError(
                "apply_b_dec_to_input=True subtracts the output bias from the input, which a transcoder does "
                "not do (SAELens and sparsify alike); pass apply_b_dec_to_input=False"
            )
        if self.normalize_activations in ("constant_norm_rescale", "layer_norm") and self.is_transcoder:
            raise ValueError(
                f"normalize_activations={self.normalize_activations!r} is undone on the output, which a "
                "transcoder writes to another hook; use 'none' for transcoders"
            )

    @property
    def width_out(self) -> int:
        """The width the decoder writes: ``d_out`` for a transcoder, else ``d_in``."""
        return self.d_in if self.d_out is None else self.d_out

    @property
    def is_transcoder(self) -> bool:
        """Whether the dictionary writes a different hook from the one it reads."""
        return self.transcoder

    @property
    def has_threshold(self) -> bool:
        """JumpReLU and BatchTopK (at inference) keep a per-latent ``threshold``."""
        return self.architecture in ("jumprelu", "batchtopk")
