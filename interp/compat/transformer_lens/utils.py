"""TransformerLens's ``utils`` / ``utilities``: the helpers notebooks call most.

``get_act_name`` follows TransformerLens 3 exactly (``get_act_name("in", 3)`` is ``blocks.3.hook_in``, one of
its canonical names, which interp models accept as an alias of ``blocks.3.hook_resid_pre``).
``tokenize_and_concatenate`` is :mod:`interp.compat.transformer_lens.token_rows`'s.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch

from interp.compat.transformer_lens.token_rows import tokenize_and_concatenate

__all__ = [
    "get_act_name",
    "get_corner",
    "get_device",
    "lm_cross_entropy_loss",
    "remove_batch_dim",
    "test_prompt",
    "to_numpy",
    "tokenize_and_concatenate",
    "transpose",
]

_LAYER_TYPE = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
_ACT = {
    "attn": "pattern",
    "attn_logits": "attn_scores",
    "key": "k",
    "query": "q",
    "value": "v",
    "mlp_pre": "pre",
    "mlp_mid": "mid",
    "mlp_post": "post",
}
_IN_ATTN = {"k", "v", "q", "z", "rot_k", "rot_q", "result", "pattern", "attn_scores"}
_IN_MLP = {"pre", "post", "mid", "pre_linear"}


def get_act_name(name: str, layer: int | str | None = None, layer_type: str | None = None) -> str:
    """A full hook name from TransformerLens's shorthand.

    A full name is returned as it is; the first run of digits in ``name`` is the layer and what follows the
    layer type (``"k6"``, ``"scale4ln1"``); norm names without a layer are the final norm's.

    >>> get_act_name("k", 6, "a"), get_act_name("pre5"), get_act_name("scale4ln1"), get_act_name("in", 2)
    ('blocks.6.attn.hook_k', 'blocks.5.mlp.hook_pre', 'blocks.4.ln1.hook_scale', 'blocks.2.hook_in')
    >>> get_act_name("embed"), get_act_name("scale")
    ('hook_embed', 'ln_final.hook_scale')
    """
    if isinstance(layer, torch.Tensor):
        layer = int(layer)
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name
    match = re.match(r"([a-z]+)(\d+)([a-z]?.*)", name)
    if match is not None:
        name, layer, layer_type = match.groups()
    name = _ACT.get(name, name)
    if name in _IN_ATTN:
        layer_type = "attn"
    elif name in _IN_MLP:
        layer_type = "mlp"
    elif layer_type in _LAYER_TYPE:
        layer_type = _LAYER_TYPE[layer_type]
    full = (f"blocks.{layer}." if layer is not None else "") + (f"{layer_type}." if layer_type else "")
    full += f"hook_{name}"
    if name in ("scale", "normalized") and layer is None:
        full = f"ln_final.{full}"
    return full


def to_numpy(tensor: Any) -> np.ndarray:
    """A NumPy array of a tensor (detached, on the CPU), a list or a number."""
    if isinstance(tensor, np.ndarray):
        return tensor
    if isinstance(tensor, torch.Tensor):
        return tensor.detach().cpu().numpy()
    if isinstance(tensor, (list, tuple, int, float)):
        return np.array(tensor)
    raise TypeError(f"to_numpy takes a tensor, an array, a list or a number, got {type(tensor).__name__}")


def get_corner(tensor: Any, n: int = 3) -> Any:
    """The first ``n`` entries of every axis (a FactoredMatrix gives its product's corner)."""
    if hasattr(tensor, "get_corner"):
        return tensor.get_corner(n)
    return tensor[tuple(slice(n) for _ in range(tensor.ndim))]


def remove_batch_dim(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor[0]`` when the leading (batch) axis has size 1, else ``tensor`` unchanged."""
    return tensor[0] if tensor.shape[0] == 1 else tensor


def transpose(tensor: torch.Tensor) -> torch.Tensor:
    """Swap the last two axes."""
    return tensor.transpose(-1, -2)


def get_device() -> torch.device:
    """``cuda`` when a GPU is visible, else Apple's ``mps`` when available, else ``cpu``."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def lm_cross_entropy_loss(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    per_token: bool = False,
) -> torch.Tensor:
    """Next-token cross-entropy: ``[batch, pos - 1]`` per token, or its mean (over real tokens with a mask)."""
    if tokens.ndim == 1:
        tokens = tokens[None]
    log_probs = logits.log_softmax(dim=-1)  # [batch, pos, d_vocab]
    picked = log_probs[:, :-1].gather(-1, tokens[:, 1:, None].to(logits.device))[..., 0]  # [batch, pos - 1]
    loss = -picked
    if attention_mask is not None:
        keep = attention_mask[:, 1:].to(loss.device).bool() & attention_mask[:, :-1].to(loss.device).bool()
        loss = loss * keep
        return loss if per_token else loss.sum() / keep.sum()
    return loss if per_token else loss.mean()


def test_prompt(
    prompt: str,
    answer: str | list[str],
    model: Any,
    prepend_space_to_answer: bool = True,
    print_details: bool = True,
    prepend_bos: bool | None = None,
    top_k: int = 10,
) -> None:
    """Print how the model ranks each token of ``answer`` after ``prompt``, and its top ``top_k`` guesses."""
    answers = [answer] if isinstance(answer, str) else list(answer)
    for one in answers:
        if prepend_space_to_answer and not one.startswith(" "):
            one = " " + one
        prompt_tokens = model.to_tokens(prompt, prepend_bos=prepend_bos)
        answer_tokens = model.to_tokens(one, prepend_bos=False)
        tokens = torch.cat([prompt_tokens, answer_tokens], dim=1)
        str_tokens = model.to_str_tokens(tokens[0])
        n_prompt = prompt_tokens.shape[1]
        if print_details:
            print("Tokenized prompt:", str_tokens[:n_prompt])
            print("Tokenized answer:", str_tokens[n_prompt:])
        probs = model(tokens)[0].softmax(dim=-1)  # [pos, d_vocab]
        for index in range(n_prompt, tokens.shape[1]):
            token = int(tokens[0, index])
            row = probs[index - 1]
            rank = int((row > row[token]).sum())
            print(
                f"Performance on answer token:\nRank: {rank: <8} Prob: {row[token]:6.2%} Token: |{str_tokens[index]}|"
            )
            if print_details:
                values, ids = row.topk(top_k)
                for i, (p, t) in enumerate(zip(values.tolist(), ids.tolist(), strict=True)):
                    print(f"Top {i}th token. Prob: {p:6.2%} Token: |{model.to_string(t)}|")
