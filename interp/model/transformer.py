"""HookedTransformer: the whole model, every activation named by its module path.

The constructor builds any combination that :class:`~interp.config.TransformerConfig` describes, with seeded
random weights; ``interp.load`` fills the same parameters from a checkpoint. Inputs are checked before any
computation, so a bad token id or mask fails with a message rather than deep inside a kernel.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from hooks import HookedModule, HookPoint
from interp.config import TransformerConfig
from interp.model.block import Block
from interp.model.embed import Embed, MLMHead, Unembed
from interp.model.norm import Norm
from interp.model.positional import PosEmbed, Rotary

INIT_STD = 0.02


class HookedTransformer(HookedModule):
    """A transformer whose every intermediate is a named, hookable activation.

    >>> cfg = TransformerConfig(n_layers=1, d_model=16, n_heads=2, d_vocab=50, n_ctx=8, seed=0)
    >>> model = HookedTransformer(cfg)
    >>> logits, cache = model.run_with_cache(torch.tensor([[1, 2, 3]]), names_filter="blocks.0.attn.hook_pattern")
    >>> logits.shape, cache["pattern", 0].shape
    (torch.Size([1, 3, 50]), torch.Size([1, 2, 3, 3]))
    """

    def __init__(self, cfg: TransformerConfig, *, init_weights: bool = True) -> None:
        super().__init__()
        if not isinstance(cfg, TransformerConfig):
            raise TypeError(f"HookedTransformer needs a TransformerConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.cache_n_layers = cfg.n_layers
        self.tokenizer: Any = None
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        if cfg.positional in ("learned", "sinusoidal"):
            self.pos_embed = PosEmbed(cfg)
            self.hook_pos_embed = HookPoint()  # [batch, pos, d_model]
        self.rotary = Rotary(cfg) if cfg.positional == "rotary" else None
        self.embed_ln = Norm(cfg) if cfg.embed_norm else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_final = Norm(cfg) if cfg.final_norm else None
        self.head = MLMHead(cfg) if cfg.lm_head == "mlm" else None
        self.unembed = Unembed(cfg, self.embed) if cfg.lm_head != "none" else None
        if init_weights:
            self.init_weights(cfg.seed)
        self.setup_hooks()

    @torch.no_grad()
    def init_weights(self, seed: int | None = None) -> None:
        """Normal(0, 0.02) matrices, unit norm gains, zero biases; reproducible for a given ``seed``."""
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        for name, param in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "w":
                param.fill_(1.0)
            elif leaf.startswith("b"):
                param.zero_()
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * INIT_STD)

    def forward(
        self,
        tokens: torch.Tensor | str | list[str],
        attention_mask: torch.Tensor | None = None,
        *,
        stop_at_layer: int | None = None,
    ) -> torch.Tensor:
        """Run the model.

        Args:
            tokens: ``[batch, pos]`` token ids (a 1-D tensor is one sequence), or text when a tokenizer is
                attached.
            attention_mask: ``[batch, pos]``, 1 for real tokens and 0 for padding, on either side. Positions
                count real tokens only, so a left-padded sequence sees the same positions as unpadded.
            stop_at_layer: return the residual stream entering this block instead of logits.

        Returns:
            Logits ``[batch, pos, d_vocab]``; the final stream ``[batch, pos, d_model]`` for an encoder
            without a head (``lm_head="none"``) or when ``stop_at_layer`` is given.
        """
        if isinstance(tokens, (str, list)):
            if attention_mask is not None:
                raise ValueError(
                    "pass attention_mask with token ids, not with text (text makes its own mask)"
                )
            tokens, attention_mask = self.to_tokens(tokens)
        tokens = self._check_tokens(tokens)
        mask, positions = self._prepare_mask(tokens, attention_mask)
        x = self.hook_embed(self.embed(tokens))
        if hasattr(self, "pos_embed"):
            x = x + self.hook_pos_embed(self.pos_embed(positions).to(x.dtype))
        if self.embed_ln is not None:
            x = self.embed_ln(x)
        rotary = self.rotary(positions, x.dtype) if self.rotary is not None else None
        for i, block in enumerate(self.blocks):
            if i == stop_at_layer:
                return x
            x = block(x, mask, rotary)
        if stop_at_layer is not None and stop_at_layer >= self.cfg.n_layers:
            raise ValueError(f"stop_at_layer={stop_at_layer} but the model has {self.cfg.n_layers} layers")
        if self.ln_final is not None:
            x = self.ln_final(x)
        if self.head is not None:
            x = self.head(x)
        return self.unembed(x) if self.unembed is not None else x

    def _check_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(
                f"tokens must be an integer tensor [batch, pos], got {getattr(tokens, 'dtype', tokens)!r}"
            )
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise ValueError(f"tokens must be [batch, pos] with pos >= 1, got shape {tuple(tokens.shape)}")
        if tokens.shape[1] > self.cfg.n_ctx:
            raise ValueError(
                f"sequence of {tokens.shape[1]} tokens is longer than the model's context n_ctx={self.cfg.n_ctx}; "
                "truncate or split the input"
            )
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or hi >= self.cfg.d_vocab:
            bad = lo if lo < 0 else hi
            raise ValueError(f"token id {bad} is out of range for a vocabulary of d_vocab={self.cfg.d_vocab}")
        return tokens.to(self.embed.W_E.device)

    def _prepare_mask(
        self, tokens: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The ``[batch, 1, query, key]`` mask (``None`` when plain causal or full) and positions ``[batch, pos]``."""
        batch, n = tokens.shape
        device = tokens.device
        if attention_mask is not None:
            if attention_mask.ndim == 1 and batch == 1:
                attention_mask = attention_mask[None]
            if tuple(attention_mask.shape) != (batch, n):
                raise ValueError(
                    f"attention_mask has shape {tuple(attention_mask.shape)}; it must match tokens, {(batch, n)}"
                )
            attention_mask = attention_mask.to(device)
            if not ((attention_mask == 0) | (attention_mask == 1)).all():
                raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
            if bool(attention_mask.all()):
                attention_mask = None
        if attention_mask is None:
            return None, torch.arange(n, device=device).expand(batch, n)
        valid = attention_mask.bool()
        positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
        allowed = valid[:, None, None, :].expand(batch, 1, n, n)  # [batch, 1, query, key]
        if self.cfg.causal:
            allowed = allowed & torch.ones(n, n, dtype=torch.bool, device=device).tril()
        # A padding query with nothing to see attends to itself, so no row is all -inf (its output is unused).
        allowed = allowed | torch.eye(n, dtype=torch.bool, device=device)
        return allowed, positions

    # Text in, text out: thin delegations to the attached tokenizer.

    def _need_tokenizer(self) -> Any:
        if self.tokenizer is None:
            raise ValueError("this model has no tokenizer; load one with interp.load(...) or pass token ids")
        return self.tokenizer

    def to_tokens(self, text: str | list[str], prepend_bos: bool | None = None, **kwargs: Any):
        """Tokenize text for this model: a :class:`interp.tokens.Tokens` batch on the model's device.

        It unpacks as ``ids, mask = model.to_tokens(texts)``; its ``offsets`` and ``span_positions`` align
        characters with tokens. Keyword arguments (e.g. ``padding_side``) go to the tokenizer.
        """
        tokens = self._need_tokenizer().to_tokens(text, prepend_bos=prepend_bos, **kwargs)
        device = self.embed.W_E.device
        return dataclasses.replace(tokens, ids=tokens.ids.to(device), mask=tokens.mask.to(device))

    def to_str_tokens(self, text: str, prepend_bos: bool | None = None) -> list[str]:
        """The tokens of ``text`` as strings."""
        return self._need_tokenizer().to_str_tokens(text, prepend_bos=prepend_bos)

    @property
    def device(self) -> torch.device:
        return self.embed.W_E.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.W_E.dtype

    # Sparse dictionaries: thin delegations to interp.sae, imported when first used.

    def saes(self, saes: Any, *, use_error_term: bool = False) -> Any:
        """A context manager splicing sparse autoencoders or transcoders into the model for a ``with`` block.

        Inside it each SAE replaces the activation at its ``hook_name`` (a transcoder's at ``hook_name_out``),
        and its hooks are listed under the model's names (``blocks.3.hook_resid_post.hook_sae_acts_post``, ...)
        for ``run_with_cache``, ``run_with_hooks`` and the analysis functions. See :mod:`interp.sae.splice`.

        Args:
            saes: an :class:`interp.sae.SAE` or a list of them, at different hooks.
            use_error_term: add the reconstruction error back, so outputs are unchanged unless edited.
        """
        from interp.sae.splice import spliced

        return spliced(self, saes, use_error_term=use_error_term)

    def run_with_saes(self, *args: Any, saes: Any, use_error_term: bool = False, **kwargs: Any) -> Any:
        """Run the forward pass with ``saes`` spliced in for this call only (see :meth:`saes`)."""
        with self.saes(saes, use_error_term=use_error_term):
            return self(*args, **kwargs)
