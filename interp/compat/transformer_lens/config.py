"""``model.cfg`` with TransformerLens's extra fields, as a read-only view of interp's config.

interp's :class:`~interp.config.TransformerConfig` says what the model is; TransformerLens's config also says
where it is (``cfg.device``) and spells some fields its own way (``normalization_type="LN"``,
``n_key_value_heads``, ``act_fn``). The view answers those from the model and the config, and every other
attribute from the config itself; it compares and hashes as the config does.
"""

from __future__ import annotations

from typing import Any

import torch

from interp.config import TransformerConfig

_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_new", "gelu_quick": "quick_gelu", "relu": "relu", "silu": "silu"}
_POSITIONAL = {"learned": "standard", "sinusoidal": "sinusoidal", "rotary": "rotary", "none": "none"}


class ConfigView:
    """interp's config of ``model`` plus TransformerLens's names for what it holds."""

    def __init__(self, cfg: TransformerConfig, model: torch.nn.Module) -> None:
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(
            self, "_model_ref", model
        )  # a plain reference, so copies of the model copy the view

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # private and dunder lookups (copy, pickle) must not reach the config
            raise AttributeError(name)
        return getattr(self._cfg, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"the config is frozen; build a new one with dataclasses.replace(model.cfg.config, {name}=...)"
        )

    @property
    def config(self) -> TransformerConfig:
        """The interp config this view shows."""
        return self._cfg

    @property
    def device(self) -> torch.device:
        return self._model_ref.device

    @property
    def dtype(self) -> torch.dtype:
        return self._model_ref.dtype

    @property
    def n_key_value_heads(self) -> int | None:
        return self._cfg.n_kv_heads if self._cfg.n_kv_heads != self._cfg.n_heads else None

    @property
    def normalization_type(self) -> str:
        return "LN" if self._cfg.norm == "layernorm" else "RMS"

    @property
    def act_fn(self) -> str:
        return _ACT[self._cfg.act]

    @property
    def positional_embedding_type(self) -> str:
        return _POSITIONAL[self._cfg.positional]

    @property
    def gated_mlp(self) -> bool:
        return self._cfg.mlp == "gated"

    @property
    def attn_only(self) -> bool:
        return False

    @property
    def model_name(self) -> str | None:
        return self._cfg.name

    @property
    def default_prepend_bos(self) -> bool:
        """TransformerLens's default: texts start with BOS whenever the tokenizer has one, also where the
        checkpoint's own tokenizer adds none (GPT-2), unless ``from_pretrained(default_prepend_bos=False)``."""
        chosen = self._model_ref.__dict__.get("_default_prepend_bos")
        if chosen is not None:
            return chosen
        tokenizer = self._model_ref.tokenizer
        return bool(tokenizer is not None and tokenizer.bos_id is not None)

    def __eq__(self, other: object) -> bool:
        return self._cfg == (other._cfg if isinstance(other, ConfigView) else other)

    def __hash__(self) -> int:
        return hash(self._cfg)

    def __repr__(self) -> str:
        return f"ConfigView({self._cfg!r})"
