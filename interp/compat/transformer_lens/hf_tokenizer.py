"""``model.tokenizer`` on the TransformerLens face: interp's tokenizer as a Hugging Face ``PreTrainedTokenizerFast``.

TransformerLens code treats ``model.tokenizer`` as the Hugging Face tokenizer it is there (``bos_token_id``,
``pad_token_id``, ``eos_token``, ``decode``, ``batch_decode``, ``convert_ids_to_tokens``, ``padding_side``,
``tokenizer(texts, padding=True, return_tensors="pt")["input_ids"]``), while interp's own code (generation,
analysis, corpus windows) calls interp's :class:`~interp.tokens.Tokenizer` on the same attribute (``to_tokens``,
``pad_id``, ``backend``). The face's tokenizer is both, so neither kind of caller has to know about the other:

- a real ``PreTrainedTokenizerFast`` over a copy of the same ``tokenizers`` backend (Hugging Face's padding and
  truncation settings stay on its copy), with the special tokens interp's tokenizer knows (a missing pad token
  is the EOS token, as TransformerLens sets it) and BOS added by ``__call__`` whenever there is one, as
  TransformerLens re-creates tokenizers (``add_bos_token=True``), so ``tokenizer(text)`` and the face's
  ``model.to_tokens(text)`` agree;
- interp's methods and fields (``to_tokens``, ``to_str_tokens``, ``bos_id``, ``eos_id``, ``pad_id``,
  ``prepends_bos``, ``n_ctx``, ``backend``...) answered by interp's tokenizer itself.

Where the two libraries use one name, Hugging Face's meaning wins (``decode``, ``vocab_size``), except
``backend``: it is interp's ``tokenizers.Tokenizer``, which interp's generation decodes with (Hugging Face keeps
only the string ``"tokenizers"`` there). ``padding_side`` is one setting for both.

``transformers`` is needed for this (it is what TransformerLens code imports anyway); the face says so when it is
missing.
"""

from __future__ import annotations

from typing import Any

from interp.tokens import Tokenizer

try:
    from transformers import PreTrainedTokenizerFast
except ImportError as err:  # the face cannot offer a Hugging Face tokenizer without transformers
    raise ImportError(
        "interp.compat.transformer_lens gives model.tokenizer as a Hugging Face tokenizer, which needs "
        f"transformers: pip install transformers ({err})"
    ) from None

_DELEGATED = (
    "to_tokens",
    "to_str_tokens",
    "bos_id",
    "eos_id",
    "pad_id",
    "prepends_bos",
    "default_prepend_bos",
    "n_ctx",
    "name",
    "char_span_to_token_positions",
    "substring_positions",
    "to_json",
)
"""interp :class:`~interp.tokens.Tokenizer` names that Hugging Face's tokenizers do not have."""


class HFTokenizer(PreTrainedTokenizerFast):
    """interp's tokenizer as a ``PreTrainedTokenizerFast`` that still answers interp's methods.

    Args:
        tokenizer: interp's tokenizer; it stays the one that interp's methods use.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"HFTokenizer wraps an interp Tokenizer, got {type(tokenizer).__name__}")
        self.__dict__["interp_tokenizer"] = tokenizer
        backend = tokenizer.backend
        special = {}
        for field, token_id in (("bos_token", tokenizer.bos_id), ("eos_token", tokenizer.eos_id)):
            if token_id is not None:
                special[field] = backend.id_to_token(token_id)
        special["pad_token"] = backend.id_to_token(tokenizer.pad_id)
        super().__init__(
            tokenizer_object=backend,
            add_bos_token=tokenizer.bos_id is not None,  # TransformerLens's tokenizer starts texts with BOS
            padding_side=tokenizer.padding_side,
            name_or_path=tokenizer.name or "",
            **({"model_max_length": tokenizer.n_ctx} if tokenizer.n_ctx is not None else {}),
            **special,
        )

    def __getattr__(self, name: str) -> Any:
        if name in _DELEGATED:
            return getattr(self.__dict__["interp_tokenizer"], name)
        return super().__getattr__(name)

    @property
    def backend(self) -> Any:
        """interp's ``tokenizers.Tokenizer`` (what interp's generation and analysis decode with)."""
        return self.__dict__["interp_tokenizer"].backend

    @backend.setter
    def backend(self, value: Any) -> None:
        # Hugging Face records the kind of backend as a string; interp's callers need the backend itself.
        self.__dict__["hf_backend_kind"] = value

    @property
    def padding_side(self) -> str:
        """Where padding goes, for Hugging Face's ``__call__`` and interp's ``to_tokens`` alike."""
        return self.__dict__["interp_tokenizer"].padding_side

    @padding_side.setter
    def padding_side(self, side: str) -> None:
        if side not in ("left", "right"):
            raise ValueError(f"padding_side={side!r}; expected 'left' or 'right'")
        self.__dict__["interp_tokenizer"].padding_side = side


def as_hf(tokenizer: Any) -> Any:
    """The face's tokenizer for ``tokenizer``: interp's wrapped, an :class:`HFTokenizer` or ``None`` as it is."""
    if tokenizer is None or isinstance(tokenizer, HFTokenizer):
        return tokenizer
    if isinstance(tokenizer, Tokenizer):
        return HFTokenizer(tokenizer)
    raise TypeError(
        f"model.tokenizer is a {type(tokenizer).__name__}; the face takes interp's Tokenizer, or a Hugging Face "
        "fast tokenizer through model.set_tokenizer(tokenizer)"
    )


def from_hf(tokenizer: Any, n_ctx: int | None = None) -> Tokenizer:
    """interp's tokenizer over a Hugging Face fast tokenizer's backend (a copy), with its special tokens.

    Args:
        tokenizer: a ``PreTrainedTokenizerFast`` (TransformerLens's ``set_tokenizer`` takes one).
        n_ctx: the model's context, so that longer texts are refused as interp refuses them.
    """
    import copy

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(
            f"set_tokenizer takes a Hugging Face fast tokenizer (with a backend_tokenizer), got "
            f"{type(tokenizer).__name__}; load it with AutoTokenizer.from_pretrained(..., use_fast=True)"
        )
    add_bos = getattr(tokenizer, "add_bos_token", None)
    return Tokenizer(
        copy.deepcopy(backend),
        bos_id=tokenizer.bos_token_id,
        eos_id=tokenizer.eos_token_id,
        pad_id=tokenizer.pad_token_id,
        prepend_bos=bool(add_bos) if add_bos is not None and tokenizer.bos_token_id is not None else None,
        padding_side=tokenizer.padding_side or "right",
        n_ctx=n_ctx,
        name=getattr(tokenizer, "name_or_path", None) or None,
    )
