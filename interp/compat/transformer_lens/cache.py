"""TransformerLens's ``ActivationCache`` methods over interp's cache, exact through the norms without folding.

TransformerLens's ``apply_ln_to_stack`` centres a stack of residual parts and divides by the cached norm
scale, and stops there: right on a model whose LayerNorm gains are folded into the next weights, wrong (with
no error) on one that is not. Here the same methods multiply by the norm's gain as well, which is interp's
exact linearisation (:func:`interp.analysis.norms.linearise_norm`): on a folded model the gain is 1 and the
numbers are TransformerLens's; on an unfolded one they are the numbers TransformerLens gives on the folded
model. Either way ``logit_attrs`` of the parts adds up to the logits less the biases after the stream.
The bias of the norm is never added to the parts (it belongs to no component), as in TransformerLens.
"""

from __future__ import annotations

from typing import Any

import torch

from hooks import ActivationCache as _Cache
from interp.analysis.decompose import head_results
from interp.analysis.norms import apply_norm, linearise_norm
from interp.compat.transformer_lens.utils import get_act_name

Slice = int | tuple | list | slice | torch.Tensor | None


def _slice(x: torch.Tensor, where: Slice, dim: int) -> torch.Tensor:
    """TransformerLens's ``Slice``: an int indexes (the axis goes), a tuple is ``slice(*t)``, a list or tensor picks."""
    if where is None:
        return x
    dim = dim % x.ndim
    if isinstance(where, int):
        return x.select(dim, where)
    if isinstance(where, tuple):
        where = slice(*where)
    if isinstance(where, slice):
        return x[(slice(None),) * dim + (where,)]
    return x.index_select(dim, torch.as_tensor(where, device=x.device))


class ActivationCache(_Cache):
    """An interp cache with TransformerLens's analysis methods (returned by the compat ``run_with_cache``)."""

    def __init__(self, cache_dict: dict[str, torch.Tensor], model: Any, has_batch_dim: bool = True) -> None:
        super().__init__(cache_dict, n_layers=model.cfg.n_layers, aliases=model.hook_aliases())
        self.model = model
        self.has_batch_dim = has_batch_dim

    @property
    def cache_dict(self) -> dict[str, torch.Tensor]:
        return self._data

    def __getitem__(self, key: Any) -> torch.Tensor:
        if isinstance(key, str) and key in self._data:
            return self._data[key]
        if isinstance(key, tuple):
            name, *rest = key
            layer = int(rest[0]) if rest and rest[0] is not None else None  # a 0-d tensor works too
            if layer is not None and layer < 0:
                layer += self.model.cfg.n_layers
            key = get_act_name(name, layer, rest[1] if len(rest) > 1 else None)
        elif isinstance(key, str):
            key = get_act_name(key)
        return super().__getitem__(key)

    def remove_batch_dim(self) -> ActivationCache:
        """Drop the batch axis of a cache of one sequence, in place (as TransformerLens does)."""
        if not self.has_batch_dim:
            return self
        sizes = {name: t.shape[0] for name, t in self._data.items() if t.ndim}
        if any(size != 1 for size in sizes.values()):
            raise ValueError(
                f"remove_batch_dim needs a batch of one sequence; this cache holds {max(sizes.values())}; "
                "index the batch instead (cache['resid_pre', 0][i])"
            )
        self._data = {name: t[0] if t.ndim else t for name, t in self._data.items()}
        self.has_batch_dim = False
        return self

    def _pos_dim(self) -> int:
        return -2

    def apply_ln_to_stack(
        self,
        residual_stack: torch.Tensor,
        layer: int | None = None,
        mlp_input: bool = False,
        pos_slice: Slice = None,
        batch_slice: Slice = None,
        has_batch_dim: bool = True,
        recompute_ln: bool = False,
    ) -> torch.Tensor:
        """Each part of ``residual_stack [component, ..., d_model]`` through the norm that reads the stream at
        ``layer`` (``ln1``; ``ln2`` with ``mlp_input``; the final norm for ``None``, ``-1`` or ``n_layers``),
        with the scale the run had frozen; ``recompute_ln`` (final norm only) applies the norm afresh to each."""
        n_layers = self.model.cfg.n_layers
        final = layer is None or layer == -1 or layer == n_layers
        block = None if final else self.model.blocks[layer]
        norm = self.model.ln_final if final else (block.ln2 if mlp_input else block.ln1)
        if norm is None:  # no norm reads the stream here
            return residual_stack
        if has_batch_dim and self.has_batch_dim:
            residual_stack = _slice(residual_stack, batch_slice, 1)
        if recompute_ln and final:
            return apply_norm(self.model, norm, residual_stack)
        name = "ln_final.hook_scale" if final else f"blocks.{layer}.ln{2 if mlp_input else 1}.hook_scale"
        scale = _slice(self[name], pos_slice, -2)
        if self.has_batch_dim and has_batch_dim:
            scale = _slice(scale, batch_slice, 0)
        return linearise_norm(self.model, norm, scale, residual_stack)

    def accumulated_resid(
        self,
        layer: int | None = None,
        incl_mid: bool = False,
        apply_ln: bool = False,
        pos_slice: Slice = None,
        mlp_input: bool = False,
        return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """The stream entering each block up to ``layer`` (``0_pre``, ``1_pre``..., ``final_post``)."""
        n_layers = self.model.cfg.n_layers
        layer = n_layers if layer is None or layer == -1 else int(layer)
        parts, labels = [], []
        for l in range(layer + 1):
            if l == n_layers:
                parts.append(self["resid_post", n_layers - 1])
                labels.append("final_post")
                continue
            parts.append(self["resid_pre", l])
            labels.append(f"{l}_pre")
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                parts.append(self["resid_mid", l])
                labels.append(f"{l}_mid")
        stack = torch.stack([_slice(p, pos_slice, -2) for p in parts])  # [component, ..., d_model]
        if apply_ln:
            stack = self.apply_ln_to_stack(
                stack, layer, mlp_input, pos_slice=pos_slice, recompute_ln=layer == n_layers
            )
        return (stack, labels) if return_labels else stack

    def decompose_resid(
        self,
        layer: int | None = None,
        mlp_input: bool = False,
        mode: str = "all",
        apply_ln: bool = False,
        pos_slice: Slice = None,
        incl_embeds: bool = True,
        return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """The stream entering ``layer`` as the embeddings and each earlier sublayer's output."""
        if mode not in ("all", "mlp", "attn"):
            raise ValueError(f"mode={mode!r}; expected 'all', 'mlp' or 'attn'")
        layer = self.model.cfg.n_layers if layer is None or layer == -1 else int(layer)
        parts, labels = [], []
        if incl_embeds:
            for name, label in (("hook_embed", "embed"), ("hook_pos_embed", "pos_embed")):
                if name in self._data:
                    parts.append(self._data[name])
                    labels.append(label)
        for l in range(layer):
            for sub in ("attn", "mlp"):
                if mode in ("all", sub):
                    parts.append(self[f"{sub}_out", l])
                    labels.append(f"{l}_{sub}_out")
        if mlp_input and mode != "mlp":
            parts.append(self["attn_out", layer])
            labels.append(f"{layer}_attn_out")
        stack = torch.stack([_slice(p, pos_slice, -2) for p in parts])  # [component, ..., d_model]
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def stack_head_results(
        self,
        layer: int = -1,
        return_labels: bool = False,
        incl_remainder: bool = False,
        pos_slice: Slice = None,
        apply_ln: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """Every head's write into the stream before ``layer`` (``L0H0``...), ``[component, ..., d_model]``;
        with ``incl_remainder``, the rest of the stream entering ``layer`` as a last part."""
        n_layers, n_heads = self.model.cfg.n_layers, self.model.cfg.n_heads
        layer = n_layers if layer is None or layer == -1 else int(layer)
        parts, labels = [], []
        for l in range(layer):
            results = head_results(self.model, self, l)  # [..., pos, head, d_model]
            if results is None:
                raise KeyError(
                    f"stack_head_results needs 'blocks.{l}.attn.hook_result' or 'hook_z' in the cache; run "
                    "run_with_cache with names_filter=None or one that includes them"
                )
            parts += list(_slice(results, pos_slice, -3).unbind(-2))
            labels += [f"L{l}H{h}" for h in range(n_heads)]
        like = _slice(self["hook_embed"], pos_slice, -2)
        stack = torch.stack(parts) if parts else like.new_zeros((0, *like.shape))
        if incl_remainder:
            stream = self["resid_post", layer - 1] if layer > 0 else self["resid_pre", 0]
            remainder = _slice(stream, pos_slice, -2) - stack.sum(0)
            stack = torch.cat([stack, remainder[None]])
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def compute_head_results(self) -> None:
        """Add ``hook_result`` of every layer from the cached ``hook_z`` (when it was not cached itself)."""
        for l in range(self.model.cfg.n_layers):
            name = f"blocks.{l}.attn.hook_result"
            if name not in self._data:
                self._data[name] = head_results(self.model, self, l)

    def stack_activation(self, activation_name: str, layer: int = -1, sublayer_type: str | None = None):
        """One activation of every block before ``layer`` stacked: ``[layer, ...]``."""
        layer = self.model.cfg.n_layers if layer == -1 else layer
        return torch.stack([self[activation_name, l, sublayer_type] for l in range(layer)])

    def logit_attrs(
        self,
        residual_stack: torch.Tensor,
        tokens: Any,
        incorrect_tokens: Any = None,
        pos_slice: Slice = None,
        batch_slice: Slice = None,
        has_batch_dim: bool = True,
    ) -> torch.Tensor:
        """How much each part of ``residual_stack`` adds to the logit of ``tokens`` (minus ``incorrect_tokens``),
        through the final norm with its frozen scale: ``[component, ...]``."""
        directions = self.model.tokens_to_residual_directions(tokens)
        if incorrect_tokens is not None:
            wrong = self.model.tokens_to_residual_directions(incorrect_tokens)
            if wrong.shape != directions.shape:
                raise ValueError(
                    f"tokens and incorrect_tokens must have the same shape; got {tuple(directions.shape[:-1])} "
                    f"and {tuple(wrong.shape[:-1])}"
                )
            directions = directions - wrong
        scaled = self.apply_ln_to_stack(
            residual_stack, -1, pos_slice=pos_slice, batch_slice=batch_slice, has_batch_dim=has_batch_dim
        )
        return (scaled * directions.to(scaled.device, scaled.dtype)).sum(-1)

    def __repr__(self) -> str:
        return f"ActivationCache with keys {list(self._data)}"
