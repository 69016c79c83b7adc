"""TransformerConfig: every architectural choice of the instrumented transformer, in one frozen record.

Variation between model families lives here, not in branches on model names: a component reads the field it
cares about (``norm``, ``positional``, ``mlp``...). Derived sizes left as ``None`` (``d_head``, ``n_kv_heads``,
``d_mlp``, ``rotary_dim``) are resolved once in ``__post_init__`` so that every reader sees plain integers.
Validation has no side effects: no RNG seeding, no device probing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_type_hints

Norm = Literal["layernorm", "rmsnorm"]
NormPlacement = Literal["pre", "post", "sandwich", "output"]
QKNorm = Literal["none", "head", "full"]
LayerType = Literal["full", "sliding"]
RotaryScalingKind = Literal["linear", "dynamic", "llama3", "yarn", "longrope", "factors"]
Positional = Literal["learned", "sinusoidal", "rotary", "none"]
Activation = Literal["gelu", "gelu_tanh", "gelu_quick", "relu", "silu"]
MLPKind = Literal["standard", "gated"]
MLPType = Literal["dense", "moe"]
ExpertWeights = Literal["softmax", "softmax_topk"]
LMHead = Literal["linear", "mlm", "none"]


@dataclass(frozen=True, kw_only=True)
class RotaryScaling:
    """How a checkpoint stretches rotary frequencies past the context it was trained on.

    The formulas are in :mod:`interp.model.positional`; the fields are the parameters those formulas read.

    Args:
        kind: ``"linear"`` (every frequency divided by ``factor``), ``"dynamic"`` (NTK-aware base growth once a
            sequence passes the model's ``n_ctx``), ``"llama3"`` (Llama 3.1: low frequencies divided by
            ``factor``, high ones kept, a smooth ramp between), ``"yarn"`` (Peng et al. 2023) or ``"longrope"``
            (Phi-3: per-frequency factors, long ones past ``original_n_ctx``) or ``"factors"`` (each frequency
            divided by its own entry of ``factors``, at every length: what llama.cpp stores as
            ``rope_freqs.weight`` in Llama 3.1 GGUF files).
        factor: the stretch factor (``None`` for yarn and longrope: ``n_ctx / original_n_ctx``).
        original_n_ctx: the context length of pretraining (llama3, yarn, longrope; dynamic grows the base
            past it, default ``n_ctx``).
        low_freq_factor, high_freq_factor: llama3's wavelength thresholds, as fractions of ``original_n_ctx``.
        beta_fast, beta_slow: yarn's bounds of the interpolation ramp, in rotations.
        mscale, mscale_all_dim: yarn's optional attention-factor parameters (DeepSeek style).
        attention_factor: what cosines and sines are multiplied by (yarn, longrope); ``None``: the formula's.
        truncate: yarn rounds the ramp's bounds to whole dimensions.
        long_factor, short_factor: longrope's per-frequency divisors, ``rotary_dim / 2`` of each.
        factors: the per-frequency divisors of ``"factors"``, ``rotary_dim / 2`` of them.
    """

    kind: RotaryScalingKind
    factor: float | None = None
    original_n_ctx: int | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    long_factor: tuple[float, ...] | None = None
    short_factor: tuple[float, ...] | None = None
    factors: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in get_args(RotaryScalingKind):
            raise ValueError(
                f"RotaryScaling.kind={self.kind!r}; expected one of {list(get_args(RotaryScalingKind))}"
            )
        for name in ("long_factor", "short_factor", "factors"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(float(v) for v in value))
        needs = {
            "linear": ("factor",),
            "dynamic": ("factor",),
            "llama3": ("factor", "original_n_ctx", "low_freq_factor", "high_freq_factor"),
            "yarn": ("original_n_ctx",),
            "longrope": ("original_n_ctx", "long_factor", "short_factor"),
            "factors": ("factors",),
        }[self.kind]
        missing = [name for name in needs if getattr(self, name) is None]
        if missing:
            raise ValueError(f"rotary scaling {self.kind!r} needs {missing}")
        for name in ("long_factor", "short_factor", "factors"):
            value = getattr(self, name)
            if value is not None and not all(v > 0 for v in value):
                raise ValueError(f"RotaryScaling.{name} must be positive divisors, got {list(value)}")
        if self.kind == "llama3" and self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"llama3 rotary scaling needs high_freq_factor > low_freq_factor, got "
                f"{self.high_freq_factor} and {self.low_freq_factor}"
            )


# Sizes that may be left as None (derived, or absent), but must be positive integers when given.
_OPTIONAL_SIZES = (
    "d_head", "n_kv_heads", "d_mlp", "rotary_dim", "n_experts", "experts_per_token", "d_expert", "d_shared_expert",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TransformerConfig:
    """The shape and wiring of a :class:`~interp.HookedTransformer`.

    Args:
        n_layers: number of blocks.
        d_model: width of the residual stream.
        n_heads: query heads per layer.
        d_head: width of one head; defaults to ``d_model // n_heads``.
        n_kv_heads: key/value heads (grouped-query attention); defaults to ``n_heads``.
        d_mlp: hidden width of the MLP; defaults to ``4 * d_model``.
        d_vocab: vocabulary size.
        n_ctx: longest sequence the model accepts.
        norm: ``"layernorm"`` (mean and variance) or ``"rmsnorm"`` (mean square only).
        norm_placement: ``"pre"`` (x + SubLayer(Norm(x)), final norm before the unembedding), ``"post"``
            (Norm(x + SubLayer(x)), as in the original transformer and BERT), ``"sandwich"``
            (x + Norm_post(SubLayer(Norm(x))), Gemma 2/3) or ``"output"`` (x + Norm_post(SubLayer(x)), OLMo 2).
            All but ``"post"`` end with a final norm.
        norm_offset: the norms multiply by ``offset + w`` (Gemma stores ``w`` around 0 and adds 1).
        norm_gain_in_float32: multiply by the gain in float32 and cast afterwards (Gemma, OLMo 2), rather
            than cast the normalised vector first (Llama). The same in float32; it matters in bfloat16.
        parallel_attn_mlp: attention and MLP both read the block's input, ``x + Attn(LN1 x) + MLP(LN2 x)``
            (GPT-NeoX, Pythia); there is no ``hook_resid_mid``.
        positional: ``"learned"``, ``"sinusoidal"`` (Vaswani et al. 2017), ``"rotary"`` or ``"none"``.
        rotary_base: base of the rotary frequencies.
        rotary_dim: how many dimensions of each head rotate; defaults to ``d_head``.
        rotary_scaling: a :class:`RotaryScaling` (or its dict) for checkpoints that stretch their context.
        local_rotary_base: the rotary base of sliding-window layers when it differs from ``rotary_base``
            (Gemma 3); those layers take no scaling.
        qk_norm: a norm on queries and keys before rotary: ``"head"`` per head over ``d_head`` (Qwen3,
            Gemma 3), ``"full"`` over the whole projection (OLMo 2), or ``"none"``.
        attn_scale: scores are divided by this; defaults to ``sqrt(d_head)`` (Gemma: ``sqrt`` of its
            ``query_pre_attn_scalar``).
        attn_softcap: scores become ``cap * tanh(scores / cap)`` before masking (Gemma 2).
        attn_sinks: each head has a learned sink logit (``attn.sinks``), a key that every query sees and whose
            value is zero: the softmax runs over the keys and the sink, so a pattern's row sums to less than 1
            (GPT-OSS).
        logit_softcap: the logits likewise (Gemma 2), before ``unembed.hook_out``.
        sliding_window: how many keys, the query's own included, a sliding-window layer sees.
        layer_types: ``"full"`` or ``"sliding"`` per layer; defaults to all sliding when ``sliding_window``
            is set, else all full.
        embed_scale: the token embeddings are multiplied by this, cast to the model's dtype (Gemma:
            ``sqrt(d_model)``).
        act: MLP nonlinearity (``"gelu_quick"``: ``x * sigmoid(1.702 x)``).
        mlp: ``"standard"`` (W_out act(W_in x)) or ``"gated"`` (W_out (act(W_gate x) * W_in x)).
        n_experts: routed experts per mixture-of-experts layer (:mod:`interp.model.moe`); ``None``: every MLP is
            dense.
        experts_per_token: how many experts each token is routed to (the router's top k).
        d_expert: hidden width of one routed expert; defaults to ``d_mlp`` (Qwen2-MoE's experts are narrower
            than its dense layers: ``moe_intermediate_size``).
        expert_weights: how the chosen experts' outputs are weighted: ``"softmax_topk"`` (a softmax over the
            chosen experts' logits, which is the softmax over all renormalised over the chosen: Mixtral,
            Qwen3-MoE) or ``"softmax"`` (the softmax over all experts, at the chosen ones, not renormalised:
            Qwen2-MoE and OLMoE, whose ``norm_topk_prob`` is false).
        router_bias: the router has a bias (GPT-OSS).
        glu_clamp: the routed experts' clamped gated unit (GPT-OSS): the gate is clamped to at most
            ``glu_clamp``, the linear half to ``[-glu_clamp, glu_clamp]`` and shifted by 1, before their product
            ``act(gate) * (up + 1)``; ``None``: ``act(gate) * up``.
        d_shared_expert: hidden width of a shared expert that every token passes through beside the routed
            ones (Qwen2-MoE); ``None``: none.
        shared_expert_gate: the shared expert's output is multiplied by ``sigmoid(x @ W_shared_gate)``
            (Qwen2-MoE).
        mlp_types: ``"dense"`` or ``"moe"`` per layer; defaults to all ``"moe"`` when ``n_experts`` is set
            (Qwen2-MoE's ``mlp_only_layers`` and ``decoder_sparse_step`` make some layers dense).
        causal: whether a query may only attend to itself and earlier keys.
        attn_bias: biases on the Q, K, V and output projections.
        mlp_bias: biases on the MLP projections.
        tie_embeddings: the unembedding is the transpose of the token embedding.
        eps: the norms' epsilon.
        seed: seed for random initialisation (``None``: torch's global RNG).
        embed_norm: a norm on the summed embeddings before the first block (BERT).
        lm_head: ``"linear"`` unembedding, ``"mlm"`` (BERT's dense + act + norm transform, then the
            unembedding), or ``"none"`` (an encoder without a head: the model returns the final stream).
        name: a label for reports (e.g. the checkpoint's name); not used by the computation.
    """

    n_layers: int
    d_model: int
    n_heads: int
    d_head: int | None = None
    n_kv_heads: int | None = None
    d_mlp: int | None = None
    d_vocab: int
    n_ctx: int
    norm: Norm = "layernorm"
    norm_placement: NormPlacement = "pre"
    norm_offset: float = 0.0
    norm_gain_in_float32: bool = False
    parallel_attn_mlp: bool = False
    positional: Positional = "learned"
    rotary_base: float = 10000.0
    rotary_dim: int | None = None
    rotary_scaling: RotaryScaling | None = None
    local_rotary_base: float | None = None
    qk_norm: QKNorm = "none"
    attn_scale: float | None = None
    attn_softcap: float | None = None
    attn_sinks: bool = False
    logit_softcap: float | None = None
    sliding_window: int | None = None
    layer_types: tuple[LayerType, ...] | None = None
    embed_scale: float = 1.0
    act: Activation = "gelu"
    mlp: MLPKind = "standard"
    n_experts: int | None = None
    experts_per_token: int | None = None
    d_expert: int | None = None
    expert_weights: ExpertWeights = "softmax_topk"
    router_bias: bool = False
    glu_clamp: float | None = None
    d_shared_expert: int | None = None
    shared_expert_gate: bool = False
    mlp_types: tuple[MLPType, ...] | None = None
    causal: bool = True
    attn_bias: bool = True
    mlp_bias: bool = True
    tie_embeddings: bool = False
    eps: float = 1e-5
    seed: int | None = None
    embed_norm: bool = False
    lm_head: LMHead = "linear"
    name: str | None = None

    def __post_init__(self) -> None:
        hints = get_type_hints(type(self))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            allowed = get_args(hints[field.name])
            if allowed and all(isinstance(a, str) for a in allowed) and value not in allowed:
                raise ValueError(f"TransformerConfig.{field.name}={value!r}; expected one of {list(allowed)}")
        for name in ("n_layers", "d_model", "n_heads", "d_vocab", "n_ctx"):
            _check_positive(name, getattr(self, name))
        for name in _OPTIONAL_SIZES:
            if getattr(self, name) is not None:
                _check_positive(name, getattr(self, name))
        if self.d_head is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                    "choose n_heads dividing d_model, or set d_head explicitly"
                )
            object.__setattr__(self, "d_head", self.d_model // self.n_heads)
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}; "
                "each key/value head must serve the same number of query heads"
            )
        if self.d_mlp is None:
            object.__setattr__(self, "d_mlp", 4 * self.d_model)
        if self.rotary_dim is None:
            object.__setattr__(self, "rotary_dim", self.d_head)
        if self.positional == "rotary" and (self.rotary_dim > self.d_head or self.rotary_dim % 2):
            raise ValueError(f"rotary_dim={self.rotary_dim} must be even and at most d_head={self.d_head}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.eps <= 0:
            raise ValueError(f"eps must be positive, got {self.eps}")
        if self.lm_head == "none" and self.tie_embeddings:
            raise ValueError("tie_embeddings=True needs an unembedding; lm_head='none' has none")
        self._resolve_attention()
        self._resolve_experts()
        if self.parallel_attn_mlp and self.norm_placement != "pre":
            raise ValueError(
                f"parallel_attn_mlp=True needs norm_placement='pre', got {self.norm_placement!r}"
            )

    def _resolve_attention(self) -> None:
        if isinstance(self.rotary_scaling, dict):
            object.__setattr__(self, "rotary_scaling", RotaryScaling(**self.rotary_scaling))
        if self.rotary_scaling is not None and not isinstance(self.rotary_scaling, RotaryScaling):
            raise ValueError(
                f"rotary_scaling must be a RotaryScaling or its dict, got {self.rotary_scaling!r}"
            )
        if (self.rotary_scaling is not None or self.local_rotary_base is not None) and (
            self.positional != "rotary"
        ):
            raise ValueError("rotary_scaling and local_rotary_base need positional='rotary'")
        for name in ("attn_scale", "attn_softcap", "logit_softcap", "local_rotary_base", "glu_clamp"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"TransformerConfig.{name} must be positive or None, got {value!r}")
        if self.embed_scale <= 0:
            raise ValueError(f"embed_scale must be positive, got {self.embed_scale}")
        if self.sliding_window is not None:
            _check_positive("sliding_window", self.sliding_window)
        types = self._per_layer(
            "layer_types", LayerType, "full" if self.sliding_window is None else "sliding"
        )
        if "sliding" in types and self.sliding_window is None:
            raise ValueError("layer_types has sliding layers but sliding_window is not set")
        if self.local_rotary_base is not None and "sliding" not in types:
            raise ValueError("local_rotary_base is the base of sliding layers, and there are none")

    def _resolve_experts(self) -> None:
        routed = self.n_experts is not None
        if not routed:
            unset = {
                "experts_per_token": self.experts_per_token is None,
                "d_expert": self.d_expert is None,
                "router_bias": not self.router_bias,
                "glu_clamp": self.glu_clamp is None,
                "d_shared_expert": self.d_shared_expert is None,
            }
            stray = [name for name, ok in unset.items() if not ok]
            if stray:
                raise ValueError(f"{stray} describe mixture-of-experts layers; set n_experts too")
        else:
            if self.experts_per_token is None:
                raise ValueError(
                    "experts_per_token must be set with n_experts: how many experts each token uses"
                )
            if self.experts_per_token > self.n_experts:
                raise ValueError(
                    f"experts_per_token={self.experts_per_token} must be from 1 to n_experts={self.n_experts}: "
                    "how many experts the router chooses for each token"
                )
            if self.d_expert is None:
                object.__setattr__(self, "d_expert", self.d_mlp)
        if self.shared_expert_gate and self.d_shared_expert is None:
            raise ValueError("shared_expert_gate=True gates a shared expert; set d_shared_expert too")
        types = self._per_layer("mlp_types", MLPType, "moe" if routed else "dense")
        if "moe" in types and not routed:
            raise ValueError("mlp_types has mixture-of-experts layers but n_experts is not set")
        if self.glu_clamp is not None and (self.mlp != "gated" or "dense" in types):
            raise ValueError(
                f"glu_clamp={self.glu_clamp} clamps the gated units of routed experts; it needs mlp='gated' "
                f"and no dense layers (got mlp={self.mlp!r}, mlp_types={list(types)})"
            )

    def _per_layer(self, name: str, kinds: Any, default: str) -> tuple[str, ...]:
        """Field ``name``, one of the Literal ``kinds`` per layer (``default`` for each when unset), as a tuple."""
        value = getattr(self, name)
        types = (default,) * self.n_layers if value is None else tuple(value)
        object.__setattr__(self, name, types)
        allowed = get_args(kinds)
        if len(types) != self.n_layers or any(t not in allowed for t in types):
            raise ValueError(
                f"{name} must give one of {list(allowed)} for each of the {self.n_layers} layers, "
                f"got {list(types)}"
            )
        return types

    @property
    def is_moe(self) -> bool:
        """Whether any layer routes its tokens to experts."""
        return "moe" in self.mlp_types

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return self.n_heads // self.n_kv_heads

    @property
    def final_norm(self) -> bool:
        """Pre-norm models end with a norm before the unembedding; post-norm blocks already end in one."""
        return self.norm_placement != "post"

    def window(self, layer: int) -> int | None:
        """The sliding window of ``layer``, or ``None`` for full attention."""
        return self.sliding_window if self.layer_types[layer] == "sliding" else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples as lists, as JSON reads them back); ``TransformerConfig(**d)`` rebuilds
        the config."""
        return dataclasses.asdict(self, dict_factory=lambda items: {k: _json_ready(v) for k, v in items})

    def replace(self, **changes: Any) -> TransformerConfig:
        """A copy with some fields changed (and the derived ones re-derived if they were defaults)."""
        return dataclasses.replace(self, **changes)


def _json_ready(value: Any) -> Any:
    return [_json_ready(v) for v in value] if isinstance(value, tuple) else value


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"TransformerConfig.{name} must be a positive integer, got {value!r}")
