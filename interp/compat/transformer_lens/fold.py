"""Weight processing that leaves the model's function unchanged: folding norms, centring, value biases.

These are TransformerLens's ``process_weights`` steps, on interp's parameters:

- ``fold_ln``: a pre-norm's gain ``w`` and bias ``b`` move into the weights that read its output
  (``W' = w[:, None] * W``, ``b' = b_W + b @ W``) and the norm keeps only its centring and scaling (gain 1,
  bias 0). After a LayerNorm, whose output has zero mean, ``W'`` also loses its mean over ``d_model``. The
  final norm folds into the unembedding; tied embeddings are untied first, since the fold must not change
  ``W_E``.
- ``center_writing_weights``: every weight that writes into the stream (``W_E``, ``W_pos``, ``W_O``, ``b_O``,
  ``W_out``, ``b_out``) loses its mean over ``d_model``; LayerNorm removes that mean anyway. RMSNorm does
  not, so models with RMSNorm are left as they are (a warning says so).
- ``center_unembed``: ``W_U`` and ``b_U`` lose their mean over the vocabulary, which shifts every logit of a
  position by the same amount (log-probabilities are unchanged).
- ``fold_value_biases``: each head's value bias is mixed by a pattern whose rows sum to 1, so its contribution
  ``b_V @ W_O`` is constant and moves into ``b_O``. With attention sinks (GPT-OSS) a row sums to less than 1,
  by a share that depends on the input, so the fold would change the model: it is refused.

Logits are unchanged up to the per-position shift of ``center_unembed``; activations between a fold and the
next norm change as described (the normed stream, ``hook_normalized``, becomes the norm's output).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn


@torch.no_grad()
def process_weights(
    model: nn.Module,
    *,
    fold_ln: bool = True,
    center_writing_weights: bool = True,
    center_unembed: bool = True,
    fold_value_biases: bool = True,
) -> nn.Module:
    """Apply the chosen steps to ``model`` in place and return it (see the module docstring)."""
    cfg = model.cfg
    if (fold_ln or center_writing_weights) and cfg.norm_placement not in ("pre", "sandwich"):
        raise ValueError(
            f"fold_ln and center_writing_weights need norms before the sublayers; this model has "
            f"norm_placement={cfg.norm_placement!r}; pass fold_ln=False, center_writing_weights=False"
        )
    if fold_value_biases and cfg.attn_sinks:
        raise ValueError(
            "fold_value_biases needs attention patterns whose rows sum to 1; this model has attention sinks "
            "(attn_sinks=True), whose rows sum to less; pass fold_value_biases=False"
        )
    if model.unembed is not None and (fold_ln or center_writing_weights or center_unembed):
        model.unembed.untie()  # the folds below must not change W_E through a tied W_U
    if fold_ln:
        for block in model.blocks:
            _fold_norm(
                block.ln1,
                [(block.attn, "W_Q", "b_Q"), (block.attn, "W_K", "b_K"), (block.attn, "W_V", "b_V")],
            )
            _fold_norm(block.ln2, block.mlp.input_weights())
        if model.ln_final is not None and model.unembed is not None and model.head is None:
            _fold_norm(model.ln_final, [(model.unembed, "W_U", "b_U")], vocab_last=True)
    if center_writing_weights:
        if cfg.norm != "layernorm":
            warnings.warn(
                "center_writing_weights skipped: RMSNorm does not remove the mean it would remove",
                stacklevel=2,
            )
        else:
            _center_writers(model)
    if center_unembed and model.unembed is not None:
        model.unembed.W_U.sub_(model.unembed.W_U.mean(-1, keepdim=True))
        model.unembed.b_U.sub_(model.unembed.b_U.mean())
    if fold_value_biases:
        for block in model.blocks:
            attn = block.attn
            if attn.b_V is not None and attn.b_O is not None:
                b_v = attn.b_V.repeat_interleave(cfg.n_heads // cfg.n_kv_heads, dim=0)  # [head, d_head]
                attn.b_O.add_(torch.einsum("he,hed->d", b_v, attn.W_O))
                attn.b_V.zero_()
    return model


def _fold_norm(norm: nn.Module, readers: list[tuple[nn.Module, str, str]], vocab_last: bool = False) -> None:
    """Move ``norm``'s gain and bias into each ``(module, weight, bias)`` that reads its output."""
    gain = norm.gain.to(norm.w.dtype)  # [d_model]
    for module, w_name, b_name in readers:
        weight = getattr(module, w_name)  # [head, d_model, d_head], [expert, d_model, out] or [d_model, out]
        axis = weight.ndim - 2
        shape = [1] * weight.ndim
        shape[axis] = -1
        if norm.b is not None:
            shift = torch.tensordot(norm.b, weight, dims=([0], [axis]))  # [head, d_head] or [out]
            bias = getattr(module, b_name)
            if bias is None:
                setattr(module, b_name, nn.Parameter(shift.clone()))
            else:
                bias.add_(shift)
        weight.mul_(gain.view(shape))
        if (
            norm.kind == "layernorm"
        ):  # the normed input has zero mean, so the reader's mean over d_model is idle
            weight.sub_(weight.mean(axis, keepdim=True))
    norm.w.fill_(1.0 - norm.offset if norm.offset else 1.0)
    if norm.b is not None:
        norm.b.zero_()


def _center_writers(model: nn.Module) -> None:
    def center(t: torch.Tensor | None) -> None:
        if t is not None:
            t.sub_(t.mean(-1, keepdim=True))

    center(model.embed.W_E)
    if hasattr(model, "pos_embed") and isinstance(model.pos_embed.W_pos, nn.Parameter):
        center(model.pos_embed.W_pos)
    for block in model.blocks:
        center(block.attn.W_O)
        center(block.attn.b_O)
        for weight, bias in block.mlp.output_weights():
            center(weight)
            center(bias)
