"""HookedTransformer: the whole model, every activation named by its module path.

The constructor builds any combination that :class:`~interp.config.TransformerConfig` describes, with seeded
random weights; ``interp.load`` fills the same parameters from a checkpoint. Inputs are checked before any
computation, so a bad token id or mask fails with a message rather than deep inside a kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from hooks import HookedModule, HookPoint
from hooks.aliases import HookAliases
from interp.config import TransformerConfig
from interp.model import extensions
from interp.model.aliases import transformer_lens_aliases
from interp.model.block import Block
from interp.model.embed import Embed, MLMHead, Unembed
from interp.model.kv_cache import KVCache
from interp.model.masks import Masks
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
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
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
        kv_cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Run the model.

        Args:
            tokens: ``[batch, pos]`` token ids (a 1-D tensor is one sequence), or text when a tokenizer is
                attached.
            attention_mask: ``[batch, pos]``, 1 for real tokens and 0 for padding, on either side. Positions
                count real tokens only, so a left-padded sequence sees the same positions as unpadded.
            stop_at_layer: return the residual stream entering this block (``n_layers``: leaving the last
                one) instead of logits.
            kv_cache: a :class:`~interp.model.kv_cache.KVCache` holding earlier positions of these sequences;
                only ``tokens`` (the new positions) are run, attending to the cached ones, and the cache is
                extended when the pass completes. Hooks see the new positions only (patterns and scores
                ``[batch, head, new, cached + new]``).

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
        if kv_cache is not None and not self.cfg.causal:
            raise ValueError(
                "a KV cache serves causal models; this one attends in both directions (causal=False)"
            )
        past = 0 if kv_cache is None else len(kv_cache)
        tokens = self._check_tokens(tokens, past)
        if stop_at_layer is not None and not 0 <= stop_at_layer <= self.cfg.n_layers:
            raise ValueError(f"stop_at_layer={stop_at_layer} but the model has {self.cfg.n_layers} layers")
        new_mask = self._check_mask(tokens, attention_mask)
        masks, positions = self._prepare_masks(tokens, new_mask, kv_cache)
        x = self.hook_embed(self.embed(tokens))
        if hasattr(self, "pos_embed"):
            x = x + self.hook_pos_embed(self.pos_embed(positions).to(x.dtype))
        if self.embed_ln is not None:
            x = self.embed_ln(x)
        rotary = self.rotary(positions, x.dtype) if self.rotary is not None else None
        layer_types = self.cfg.layer_types
        for i, block in enumerate(self.blocks):
            if i == stop_at_layer:
                return x
            window = self.cfg.window(i)
            x = block(x, masks.for_window(window), rotary and rotary[layer_types[i]], kv_cache)
        if kv_cache is not None:
            kv_cache.commit(new_mask if new_mask is not None else torch.ones_like(tokens, dtype=torch.bool))
        if stop_at_layer == self.cfg.n_layers:
            return x
        if self.ln_final is not None:
            x = self.ln_final(x)
        if self.head is not None:
            x = self.head(x)
        return self.unembed(x) if self.unembed is not None else x

    def _check_tokens(self, tokens: torch.Tensor, past: int = 0) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(
                f"tokens must be an integer tensor [batch, pos], got {getattr(tokens, 'dtype', tokens)!r}"
            )
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2 or 0 in tokens.shape:
            raise ValueError(
                f"tokens must be [batch, pos] with batch >= 1 and pos >= 1, got shape {tuple(tokens.shape)}"
            )
        if past + tokens.shape[1] > self.cfg.n_ctx:
            length = f"{past} cached + {tokens.shape[1]} new" if past else f"{tokens.shape[1]}"
            raise ValueError(
                f"sequence of {length} tokens is longer than the model's context n_ctx={self.cfg.n_ctx}; "
                "truncate or split the input"
            )
        lo, hi = torch.stack(torch.aminmax(tokens)).tolist()  # one wait for the device, not two
        if lo < 0 or hi >= self.cfg.d_vocab:
            bad = lo if lo < 0 else hi
            raise ValueError(f"token id {bad} is out of range for a vocabulary of d_vocab={self.cfg.d_vocab}")
        return tokens.to(self.embed.W_E.device)

    def _check_mask(self, tokens: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor | None:
        """The ``[batch, pos]`` boolean mask of real tokens, or ``None`` when all are real."""
        if attention_mask is None:
            return None
        batch, n = tokens.shape
        if attention_mask.ndim == 1 and batch == 1:
            attention_mask = attention_mask[None]
        if tuple(attention_mask.shape) != (batch, n):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}; it must match tokens, {(batch, n)}"
            )
        attention_mask = attention_mask.to(tokens.device)
        if not ((attention_mask == 0) | (attention_mask == 1)).all():
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
        return attention_mask.bool()

    def _prepare_masks(
        self, tokens: torch.Tensor, new_mask: torch.Tensor | None, kv_cache: KVCache | None
    ) -> tuple[Masks, torch.Tensor]:
        """The layers' :class:`~interp.model.masks.Masks` and the positions ``[batch, pos]`` of the tokens."""
        batch, n = tokens.shape
        device = tokens.device
        if kv_cache is None:
            valid = None if new_mask is None or bool(new_mask.all()) else new_mask
            if valid is None:
                positions = torch.arange(n, device=device).expand(batch, n)
            else:
                positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
            return Masks(valid, n, n, self.cfg.causal, device), positions
        mask = new_mask if new_mask is not None else torch.ones(batch, n, dtype=torch.bool, device=device)
        keys = kv_cache.key_mask(mask)  # [batch, past + new]
        valid = None if bool(keys.all()) else keys
        return Masks(valid, n, keys.shape[1], self.cfg.causal, device), kv_cache.positions(mask)

    @contextlib.contextmanager
    def split_inputs(self) -> Iterator[HookedTransformer]:
        """Give every head and MLP an input stream of its own for the duration of a ``with`` block.

        Inside it each block has ``hook_q_input [batch, pos, head, d_model]``, ``hook_k_input`` and
        ``hook_v_input [batch, pos, kv_head, d_model]`` (the stream each head's queries, keys and values read,
        before the norm) and ``hook_mlp_in [batch, pos, d_model]``; their names are registered and removed
        again on exit, also when the block raises. The forward pass computes the same function (each head's
        projection reads its own copy). While the heads' copies are one stream, unedited, the norm and the
        projections run once per position (:mod:`interp.model.head_norm`), but a backward pass forms each
        head's gradient, ``[batch, pos, head, d_model]`` per layer, and an edited stream is normalised per head:
        split inputs are for edge-level work such as circuits, not for plain runs. ``ln1``'s hooks then see
        ``[batch, pos, head, ...]`` shapes, once for queries, keys and values each.

        >>> model = HookedTransformer(TransformerConfig(n_layers=1, d_model=8, n_heads=2, d_vocab=10, n_ctx=4))
        >>> with model.split_inputs():
        ...     "blocks.0.hook_q_input" in model.hook_dict
        True
        >>> "blocks.0.hook_q_input" in model.hook_dict
        False
        """
        added: list[str] = []
        try:
            for layer, block in enumerate(self.blocks):
                for name in block.split_inputs(True):
                    point = getattr(block, name)
                    point.name, point.layer = f"blocks.{layer}.{name}", layer
                    added.append(point.name)
            self._register_points(added)
            yield self
        finally:
            for block in self.blocks:
                block.split_inputs(False)
            for name in added:
                self.hook_dict.pop(name, None)

    def hook_aliases(self) -> HookAliases:
        """TransformerLens 3's canonical names (``blocks.3.hook_in``, ``blocks.3.attn.hook_out``...) as aliases
        of this model's hook points; see :mod:`interp.model.aliases`."""
        return transformer_lens_aliases(self.cfg, tuple(self.hook_dict))

    def _register_points(self, names: list[str]) -> None:
        """Add hook points created after construction to ``hook_dict``, keeping it in forward order."""
        points = {name: self.get_submodule(name) for name in names}
        order = [path for path, module in self.named_modules() if isinstance(module, HookPoint)]
        merged = {**self.hook_dict, **points}
        self.hook_dict = {name: merged[name] for name in order if name in merged}

    def generate(self, input: Any, max_new_tokens: int, **kwargs: Any) -> Any:
        """Generate text with hooks in place: :func:`interp.generate` with this model.

        >>> out = model.generate("The capital of France is", max_new_tokens=8)  # doctest: +SKIP
        >>> out.text[0], out.tokens.shape  # doctest: +SKIP
        """
        return extensions.implementation("generate")(self, input, max_new_tokens, **kwargs)

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

    # Sparse dictionaries: thin delegations to interp.sae, reached through the registry (see extensions.py).

    def saes(self, saes: Any, *, use_error_term: bool = False) -> Any:
        """A context manager splicing sparse autoencoders or transcoders into the model for a ``with`` block.

        Inside it each SAE replaces the activation at its ``hook_name`` (a transcoder's at ``hook_name_out``),
        and its hooks are listed under the model's names (``blocks.3.hook_resid_post.hook_sae_acts_post``, ...)
        for ``run_with_cache``, ``run_with_hooks`` and the analysis functions. See :mod:`interp.sae.splice`.

        Args:
            saes: an :class:`interp.sae.SAE` or a list of them, at different hooks (or any sparse dictionary:
                the splice is one for every kind, :func:`interp.sae.spliced`).
            use_error_term: add the reconstruction error back, so outputs are unchanged unless edited.
        """
        return extensions.implementation("saes")(self, saes, use_error_term=use_error_term)

    def run_with_saes(self, *args: Any, saes: Any, use_error_term: bool = False, **kwargs: Any) -> Any:
        """Run the forward pass with ``saes`` spliced in for this call only (see :meth:`saes`)."""
        with self.saes(saes, use_error_term=use_error_term):
            return self(*args, **kwargs)

    def transcoders(self, tc: Any, *, error: bool = False) -> Any:
        """A context manager splicing transcoders in place of the MLPs they cover: the replacement model.

        Args:
            tc: an :class:`interp.sae.TranscoderSet` or :class:`interp.sae.CrossLayerTranscoder`.
            error: add each layer's reconstruction error back, so outputs are unchanged unless edited.

        The same splice as :meth:`saes` (:mod:`interp.sae.splice`, which names the hooks).
        """
        return extensions.implementation("transcoders")(self, tc, error=error)
