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
NormPlacement = Literal["pre", "post"]
Positional = Literal["learned", "sinusoidal", "rotary", "none"]
Activation = Literal["gelu", "gelu_tanh", "relu", "silu"]
MLPKind = Literal["standard", "gated"]
LMHead = Literal["linear", "mlm", "none"]


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
        norm_placement: ``"pre"`` (x + SubLayer(Norm(x)), final norm before the unembedding) or ``"post"``
            (Norm(x + SubLayer(x)), as in the original transformer and BERT).
        positional: ``"learned"``, ``"sinusoidal"`` (Vaswani et al. 2017), ``"rotary"`` or ``"none"``.
        rotary_base: base of the rotary frequencies.
        rotary_dim: how many dimensions of each head rotate; defaults to ``d_head``.
        act: MLP nonlinearity.
        mlp: ``"standard"`` (W_out act(W_in x)) or ``"gated"`` (W_out (act(W_gate x) * W_in x)).
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
    positional: Positional = "learned"
    rotary_base: float = 10000.0
    rotary_dim: int | None = None
    act: Activation = "gelu"
    mlp: MLPKind = "standard"
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
        for name in ("d_head", "n_kv_heads", "d_mlp", "rotary_dim"):
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

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return self.n_heads // self.n_kv_heads

    @property
    def final_norm(self) -> bool:
        """Pre-norm models end with a norm before the unembedding; post-norm blocks already end in one."""
        return self.norm_placement == "pre"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``TransformerConfig(**d)`` rebuilds the config."""
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> TransformerConfig:
        """A copy with some fields changed (and the derived ones re-derived if they were defaults)."""
        return dataclasses.replace(self, **changes)


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"TransformerConfig.{name} must be a positive integer, got {value!r}")
