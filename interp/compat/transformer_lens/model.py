"""``HookedTransformer``: interp's model with TransformerLens's methods and signatures.

It is interp's :class:`interp.HookedTransformer` (the same modules, hooks and fast paths), with the parts of
TransformerLens's interface that notebooks use: ``from_pretrained`` with weight processing, ``return_type=``,
``loss_fn``, stacked weights (``W_Q``..., ``OV``, ``QK``), token helpers with TransformerLens's return types,
``run_with_cache`` returning a cache with the analysis methods, persistent hooks, and ``model.tokenizer`` as
the Hugging Face tokenizer TransformerLens code expects (:mod:`interp.compat.transformer_lens.hf_tokenizer`,
which still answers interp's own tokenizer methods). Nothing here computes what interp's model or analysis
already computes; the methods translate arguments and results.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from interp.compat.transformer_lens.cache import ActivationCache
from interp.compat.transformer_lens.config import ConfigView
from interp.compat.transformer_lens.factored_matrix import FactoredMatrix
from interp.compat.transformer_lens.fold import process_weights
from interp.compat.transformer_lens.hf_tokenizer import as_hf, from_hf
from interp.compat.transformer_lens.stacked_weights import stacked
from interp.compat.transformer_lens.tokens import TokenMethods
from interp.compat.transformer_lens.utils import lm_cross_entropy_loss
from interp.load import load
from interp.model import HookedTransformer as _HookedTransformer

ReturnType = Literal["logits", "loss", "both"] | None
_RETURN_TYPES = ("logits", "loss", "both", None)


class HookedTransformer(TokenMethods, _HookedTransformer):
    """interp's transformer answering to TransformerLens's API (see :mod:`interp.compat.transformer_lens`)."""

    ungroup_grouped_query_attention: bool = False

    @classmethod
    def from_pretrained(
        cls,
        model_name: str,
        *,
        fold_ln: bool = True,
        center_writing_weights: bool = True,
        center_unembed: bool = True,
        fold_value_biases: bool = True,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        **kwargs: Any,
    ) -> HookedTransformer:
        """``interp.load(model_name)`` (a packaged name, a folder or a GGUF file), with TransformerLens's weight
        processing applied by default, as its ``from_pretrained`` does
        (see :mod:`interp.compat.transformer_lens.fold`): writing weights are centred only after LayerNorm,
        and value biases are not folded in a model with attention sinks, where the fold would change it."""
        unknown = set(kwargs) - {"move_to_device", "default_prepend_bos", "default_padding_side", "n_devices"}
        if unknown:
            raise TypeError(
                f"from_pretrained got {sorted(unknown)}, which interp does not take; it loads with "
                "interp.load(name, device=, dtype=) and processes with fold_ln, center_writing_weights, "
                "center_unembed, fold_value_biases"
            )
        load_kwargs = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None}
        model = cls.from_interp(load(model_name, **load_kwargs))
        if kwargs.get("default_padding_side") and model.tokenizer is not None:
            model.tokenizer.padding_side = kwargs["default_padding_side"]
        if kwargs.get("default_prepend_bos") is not None:
            model.__dict__["_default_prepend_bos"] = bool(kwargs["default_prepend_bos"])
        return model.process_weights(
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights and model.cfg.norm == "layernorm",
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases and not model.cfg.attn_sinks,
        )

    @classmethod
    def from_pretrained_no_processing(cls, model_name: str, **kwargs: Any) -> HookedTransformer:
        """:meth:`from_pretrained` without any weight processing: the checkpoint's own parameters."""
        flags = dict(
            fold_ln=False, center_writing_weights=False, center_unembed=False, fold_value_biases=False
        )
        return cls.from_pretrained(model_name, **flags, **kwargs)

    @classmethod
    def from_interp(cls, model: _HookedTransformer) -> HookedTransformer:
        """This face on an interp model already built or loaded: the same object, nothing copied."""
        if not isinstance(model, _HookedTransformer):
            raise TypeError(f"from_interp takes an interp HookedTransformer, got {type(model).__name__}")
        model.__class__ = cls
        if not isinstance(model.cfg, ConfigView):
            model.cfg = ConfigView(model.cfg, model)  # cfg.device and TransformerLens's field names
        model.tokenizer = model.__dict__.get("tokenizer")  # through the property: the Hugging Face face
        return model

    @property
    def tokenizer(self) -> Any:
        """The Hugging Face tokenizer TransformerLens code uses, which also answers interp's tokenizer methods
        (see :mod:`interp.compat.transformer_lens.hf_tokenizer`); ``None`` without one."""
        return self.__dict__.get("tokenizer")

    @tokenizer.setter
    def tokenizer(self, tokenizer: Any) -> None:
        self.__dict__["tokenizer"] = as_hf(tokenizer)

    def set_tokenizer(self, tokenizer: Any, default_padding_side: str | None = None) -> None:
        """Use a Hugging Face fast tokenizer (or interp's) for this model, as TransformerLens's ``set_tokenizer``."""
        if default_padding_side not in ("left", "right", None):
            raise ValueError(
                f"default_padding_side={default_padding_side!r}; expected 'left', 'right' or None"
            )
        if hasattr(tokenizer, "backend_tokenizer") and not hasattr(tokenizer, "interp_tokenizer"):
            tokenizer = from_hf(tokenizer, n_ctx=self.cfg.n_ctx)
        self.tokenizer = tokenizer
        if default_padding_side is not None:
            self.tokenizer.padding_side = default_padding_side

    def process_weights(
        self,
        fold_ln: bool = True,
        center_writing_weights: bool = True,
        center_unembed: bool = True,
        fold_value_biases: bool = True,
        refactor_factored_attn_matrices: bool = False,
    ) -> HookedTransformer:
        """Fold and centre the weights in place, as TransformerLens does
        (see :mod:`interp.compat.transformer_lens.fold`)."""
        if refactor_factored_attn_matrices:
            raise ValueError("refactor_factored_attn_matrices is not supported; pass False")
        process_weights(
            self,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
        )
        return self

    process_weights_ = process_weights

    # The forward pass with TransformerLens's arguments.

    def forward(
        self,
        input: Any,
        *args: Any,
        return_type: ReturnType = "logits",
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: str | None = None,
        attention_mask: torch.Tensor | None = None,
        stop_at_layer: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """Logits, the loss, both, or ``None`` (``return_type``) of token ids or text.

        With ``stop_at_layer`` the stream entering that block is returned, whatever ``return_type`` says. A
        second positional argument is TransformerLens's ``return_type`` when it is a string, and interp's
        ``attention_mask`` when it is a tensor or ``None``: interp's own callers (``generate``, ``patch``,
        ``run_conditions``) pass the mask there, and ``None`` there means no mask, never ``return_type=None``
        (which TransformerLens code passes by keyword).
        """
        if len(args) > 1:
            raise TypeError(
                f"forward takes the input and at most one more positional argument (return_type or an "
                f"attention mask), got {len(args) + 1}; pass the others by keyword"
            )
        if args:
            if isinstance(args[0], str):
                return_type = args[0]
            elif args[0] is None or isinstance(args[0], torch.Tensor):
                attention_mask = args[0] if attention_mask is None else attention_mask
            else:
                raise TypeError(
                    f"the second positional argument is {type(args[0]).__name__} {args[0]!r}; give return_type "
                    "as a string or an attention mask as a tensor"
                )
        if return_type not in _RETURN_TYPES:
            raise ValueError(f"return_type={return_type!r}; expected 'logits', 'loss', 'both' or None")
        if return_type in ("loss", "both") and (self.unembed is None or self.head is not None):
            raise ValueError(
                f"return_type={return_type!r} needs next-token logits, but this model has "
                f"lm_head={self.cfg.lm_head!r}; use return_type='logits' (or None) and compute the loss you "
                "need from the output"
            )
        if isinstance(input, (str, list)):
            tokens = self._text_tokens(input, prepend_bos, padding_side)
            ids = tokens.ids.to(self.device)
            if attention_mask is None and not bool(tokens.mask.all()):
                attention_mask = tokens.mask.to(self.device)
        else:
            ids = input
        out = super().forward(ids, attention_mask, stop_at_layer=stop_at_layer, **kwargs)
        if stop_at_layer is not None or return_type == "logits":
            return out
        if return_type is None:
            return None
        loss = self.loss_fn(out, ids, attention_mask=attention_mask, per_token=loss_per_token)
        return loss if return_type == "loss" else (out, loss)

    def loss_fn(
        self,
        logits: torch.Tensor,
        tokens: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        per_token: bool = False,
    ) -> torch.Tensor:
        """Next-token cross-entropy of ``logits [batch, pos, d_vocab]`` for ``tokens [batch, pos]``."""
        return lm_cross_entropy_loss(logits, tokens, attention_mask, per_token)

    def run_with_cache(
        self, *args: Any, remove_batch_dim: bool = False, return_cache_object: bool = True, **kwargs: Any
    ) -> tuple[Any, Any]:
        """interp's ``run_with_cache`` returning a cache with TransformerLens's methods."""
        out, cache = super().run_with_cache(*args, **kwargs)
        tl_cache = ActivationCache(dict(cache.items()), self)
        if remove_batch_dim:
            tl_cache.remove_batch_dim()
        return out, (tl_cache if return_cache_object else dict(tl_cache.items()))

    def run_with_hooks(
        self,
        *args: Any,
        fwd_hooks: Any = (),
        bwd_hooks: Any = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run with hooks for this call only (they are removed at the end whatever ``reset_hooks_end`` says)."""
        return super().run_with_hooks(*args, fwd_hooks=fwd_hooks, bwd_hooks=bwd_hooks, **kwargs)

    def generate(
        self,
        input: Any = "",
        max_new_tokens: int = 10,
        stop_at_eos: bool = True,
        eos_token_id: int | None = None,
        do_sample: bool = True,
        top_k: int | None = None,
        top_p: float | None = None,
        temperature: float = 1.0,
        freq_penalty: float = 0.0,
        use_past_kv_cache: bool = True,
        prepend_bos: bool | None = None,
        padding_side: str | None = None,
        return_type: str = "input",
        verbose: bool = True,
        **kwargs: Any,
    ) -> Any:
        """TransformerLens's ``generate``: text in, text out (prompt and continuation), or ids in, ids out.

        Runs :func:`interp.generation.generate`; ``return_type`` is ``"input"`` (the type given), ``"str"`` or
        ``"tokens"``. Keyword arguments interp's generate takes (``fwd_hooks``, ``seed``...) pass through.
        """
        from interp.generation import generate

        if freq_penalty:
            raise ValueError("freq_penalty is not supported by interp's generate; pass freq_penalty=0")
        if return_type not in ("input", "str", "tokens"):
            raise ValueError(f"return_type={return_type!r}; expected 'input', 'str' or 'tokens'")
        text_in, one_text = isinstance(input, (str, list)), isinstance(input, str)
        if text_in:  # interp's Tokens, left-padded, so generate does not re-tokenize
            input = self._text_tokens(input, prepend_bos, padding_side="left")
        out = generate(
            self,
            input,
            max_new_tokens,
            do_sample=do_sample,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            stop_at_eos=stop_at_eos,
            eos_token_id=eos_token_id,
            use_kv_cache=use_past_kv_cache,
            progress=False,
            **kwargs,
        )
        if return_type == "tokens" or (return_type == "input" and not text_in):
            return out.tokens
        rows = [self.to_string(row[m.bool()]) for row, m in zip(out.tokens, out.mask, strict=True)]
        return rows[0] if one_text else rows

    # Weights, stacked over layers.

    def _stacked(self, name: str) -> torch.Tensor | None:
        return stacked(self, name, ungroup=self.ungroup_grouped_query_attention)

    W_Q = property(lambda self: self._stacked("W_Q"), doc="``[layer, head, d_model, d_head]``")
    W_K = property(lambda self: self._stacked("W_K"), doc="``[layer, kv_head, d_model, d_head]``")
    W_V = property(lambda self: self._stacked("W_V"), doc="``[layer, kv_head, d_model, d_head]``")
    W_O = property(lambda self: self._stacked("W_O"), doc="``[layer, head, d_head, d_model]``")
    b_Q = property(lambda self: self._stacked("b_Q"))
    b_K = property(lambda self: self._stacked("b_K"))
    b_V = property(lambda self: self._stacked("b_V"))
    b_O = property(lambda self: self._stacked("b_O"))
    W_in = property(lambda self: self._stacked("W_in"))
    W_gate = property(lambda self: self._stacked("W_gate"))
    W_out = property(lambda self: self._stacked("W_out"))
    b_in = property(lambda self: self._stacked("b_in"))
    b_out = property(lambda self: self._stacked("b_out"))

    @property
    def W_E(self) -> torch.Tensor:
        return self.embed.W_E

    @property
    def W_pos(self) -> torch.Tensor:
        if not hasattr(self, "pos_embed"):
            raise AttributeError(
                f"W_pos: this model has positional={self.cfg.positional!r}, no position table"
            )
        return self.pos_embed.W_pos

    @property
    def W_U(self) -> torch.Tensor:
        return self.unembed.weight

    @property
    def b_U(self) -> torch.Tensor:
        return self.unembed.b_U

    @property
    def QK(self) -> FactoredMatrix:
        """``W_Q @ W_K.T`` of every head, ``[layer, head, d_model, d_model]`` (keys ungrouped per query head)."""
        return FactoredMatrix(self.W_Q, stacked(self, "W_K", ungroup=True).transpose(-2, -1))

    @property
    def OV(self) -> FactoredMatrix:
        """``W_V @ W_O`` of every head, ``[layer, head, d_model, d_model]`` (values ungrouped per query head)."""
        return FactoredMatrix(stacked(self, "W_V", ungroup=True), self.W_O)

    def set_ungroup_grouped_query_attention(self, ungroup: bool) -> None:
        """Make ``W_K``/``W_V``/``b_K``/``b_V`` one per query head (``True``) or one per key/value head."""
        self.ungroup_grouped_query_attention = bool(ungroup)

    def set_use_attn_result(self, use_attn_result: bool) -> None:
        """Accepted for TransformerLens code; interp computes ``hook_result`` whenever it is hooked or cached."""

    def set_use_split_qkv_input(self, use_split_qkv_input: bool) -> None:
        raise ValueError(
            "interp splits head inputs for a block of code: use `with model.split_inputs(): ...`"
        )

    def tl_named_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        """``named_parameters`` with the tied unembedding listed as ``unembed.W_U``, as TransformerLens lists it."""
        params = list(self.named_parameters())
        if self.unembed is not None and self.unembed.tied:
            params.append(("unembed.W_U", self.unembed.weight))
        return params

    def tokens_to_residual_directions(self, tokens: Any) -> torch.Tensor:
        """The unembedding columns of ``tokens`` (a one-token string, an id, or ids), ``[..., d_model]``."""
        if isinstance(tokens, str):
            tokens = self.to_single_token(tokens)
        w_u = self.W_U  # [d_model, d_vocab]
        if isinstance(tokens, int):
            return w_u[:, tokens]
        return w_u[:, torch.as_tensor(tokens, device=w_u.device)].movedim(0, -1)  # [..., d_model]
