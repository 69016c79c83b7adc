"""TransformerLens's token helpers, with its return types, over interp's tokenizer.

``to_tokens`` returns the ``[batch, pos]`` id tensor (``return_mask=True`` adds the attention mask), so
``len(model.to_tokens(text)[0])`` is the number of tokens, as TransformerLens code expects; interp's own
``to_tokens`` returns a :class:`interp.tokens.Tokens` with offsets. Text starts with BOS unless
``prepend_bos=False``, as in TransformerLens (``model.cfg.default_prepend_bos``), where interp's own model
follows the checkpoint's tokenizer.
"""

from __future__ import annotations

from typing import Any

import torch


class TokenMethods:
    """Mixed into the compat ``HookedTransformer``; relies on interp's ``_need_tokenizer`` and ``device``."""

    def _text_tokens(
        self, text: Any, prepend_bos: bool | None = None, padding_side: str | None = None
    ) -> Any:
        """interp's :class:`~interp.tokens.Tokens` of ``text``, BOS per TransformerLens's default."""
        if prepend_bos is None:
            prepend_bos = self.cfg.default_prepend_bos
        return self._need_tokenizer().to_tokens(text, prepend_bos=prepend_bos, padding_side=padding_side)

    def to_tokens(
        self,
        input: str | list[str],
        prepend_bos: bool | None = None,
        padding_side: str | None = None,
        move_to_device: bool = True,
        truncate: bool = True,
        return_mask: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Token ids ``[batch, pos]`` of a text or a list of texts (and the mask with ``return_mask``)."""
        tokens = self._text_tokens(input, prepend_bos, padding_side)
        ids, mask = tokens.ids, tokens.mask
        if move_to_device:
            ids, mask = ids.to(self.device), mask.to(self.device)
        return (ids, mask) if return_mask else ids

    def to_str_tokens(
        self, input: Any, prepend_bos: bool | None = None, padding_side: str | None = None
    ) -> list[str] | list[list[str]]:
        """Each token as a string, of a text, a list of texts, ids (1-D, or ``[1, pos]``) or a list of ids."""
        tokenizer = self._need_tokenizer()
        if isinstance(input, torch.Tensor):
            if input.ndim == 2:
                if input.shape[0] != 1:
                    raise ValueError(
                        f"to_str_tokens of a 2-D tensor needs one row, [1, pos]; got {tuple(input.shape)}; "
                        "call it once per row"
                    )
                input = input[0]
            return tokenizer.to_str_tokens(input.reshape(-1).tolist())
        if isinstance(input, list) and input and not isinstance(input[0], str):
            return (
                [self.to_str_tokens(row, prepend_bos) for row in input]
                if isinstance(input[0], (list, torch.Tensor))
                else tokenizer.to_str_tokens(list(input))
            )
        if prepend_bos is None:
            prepend_bos = self.cfg.default_prepend_bos
        return tokenizer.to_str_tokens(input, prepend_bos=prepend_bos)

    def to_string(self, tokens: Any) -> str | list[str]:
        """Text of an id, a 0-d or 1-D tensor or list of ids; a list of texts for ``[batch, pos]``."""
        tokenizer = self._need_tokenizer()
        if isinstance(tokens, int):
            return tokenizer.decode([tokens])
        tokens = torch.as_tensor(tokens)
        if tokens.ndim == 0:
            return tokenizer.decode([int(tokens)])
        if tokens.ndim > 2:
            raise ValueError(f"to_string takes ids of at most 2 axes [batch, pos]; got {tuple(tokens.shape)}")
        return tokenizer.decode(tokens.cpu())

    def to_single_token(self, string: str) -> int:
        """The id of a string that is exactly one token (no BOS added)."""
        ids = self.to_tokens(string, prepend_bos=False, move_to_device=False)[0]
        if ids.numel() != 1:
            pieces = self._need_tokenizer().to_str_tokens(ids.tolist())
            raise ValueError(
                f"to_single_token({string!r}): it is {ids.numel()} tokens, {pieces}; pass one of them, or use "
                f"model.to_tokens({string!r}, prepend_bos=False) for all of them"
            )
        return int(ids[0])

    def get_token_position(
        self,
        single_token: str | int | torch.Tensor,
        input: str | torch.Tensor,
        mode: str = "first",
        prepend_bos: bool | None = None,
        padding_side: str | None = None,
    ) -> int:
        """The position of ``single_token`` in ``input`` (its first or last occurrence, per ``mode``)."""
        if mode not in ("first", "last"):
            raise ValueError(f"mode={mode!r}; expected 'first' or 'last'")
        tokens = self.to_tokens(input, prepend_bos, padding_side) if isinstance(input, str) else input
        if tokens.ndim == 2:
            if tokens.shape[0] != 1:
                raise ValueError(
                    f"get_token_position takes one sequence, [pos] or [1, pos]; got {tuple(tokens.shape)}"
                )
            tokens = tokens[0]
        token = self.to_single_token(single_token) if isinstance(single_token, str) else int(single_token)
        where = (tokens == token).nonzero().flatten().tolist()
        if not where:
            raise ValueError(f"token {self.to_string(token)!r} ({token}) does not occur in the input")
        return where[0] if mode == "first" else where[-1]
