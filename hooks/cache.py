"""ActivationCache: a read-only mapping from hook names to the tensors captured in one run."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from hooks.aliases import HookAliases
from hooks.names import UnknownHookError, unknown_hook_message

# Short names, as in the convention most interpretability users know: cache["pattern", 3].
_SHORT: dict[str, str] = {
    **{k: "blocks.{L}.attn.hook_" + k for k in ("q", "k", "v", "z", "rot_q", "rot_k", "result", "pattern")},
    "attn_scores": "blocks.{L}.attn.hook_attn_scores",
    "scores": "blocks.{L}.attn.hook_attn_scores",
    "attn": "blocks.{L}.attn.hook_pattern",
    **{k: "blocks.{L}.hook_" + k for k in ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")},
    "pre": "blocks.{L}.mlp.hook_pre",
    "pre_linear": "blocks.{L}.mlp.hook_pre_linear",
    "post": "blocks.{L}.mlp.hook_post",
    "mlp_pre": "blocks.{L}.mlp.hook_pre",
    "mlp_post": "blocks.{L}.mlp.hook_post",
    "scale": "blocks.{L}.{N}.hook_scale",
    "normalized": "blocks.{L}.{N}.hook_normalized",
}


def expand_short_name(key: str | tuple, n_layers: int | None = None) -> str:
    """``("pattern", 3)`` -> ``"blocks.3.attn.hook_pattern"``; a full name is returned unchanged.

    A tuple is ``(short, layer)`` or, for norms, ``(short, layer, "ln1" | "ln2")``. Negative layers count
    from the end when ``n_layers`` is known. ``("embed",)`` and ``"embed"`` give ``hook_embed``.
    """
    if isinstance(key, str):
        if key in ("embed", "pos_embed"):
            return f"hook_{key}"
        return key
    if not isinstance(key, tuple) or not key:
        raise TypeError(f"cache keys are names or (short_name, layer) tuples, got {key!r}")
    short, *rest = key
    if short in ("embed", "pos_embed") and not rest:
        return f"hook_{short}"
    if short not in _SHORT:
        raise UnknownHookError(f"unknown short name {short!r}; known: {sorted(_SHORT)}")
    if rest and isinstance(rest[0], torch.Tensor) and rest[0].ndim == 0 and not rest[0].is_floating_point():
        rest[0] = int(rest[0])  # a layer index held in a 0-d tensor
    if not rest or not isinstance(rest[0], int):
        raise TypeError(f"{key!r}: the second element must be a layer index")
    layer = rest[0]
    if layer < 0 and n_layers is not None:
        layer += n_layers
    template = _SHORT[short]
    if "{N}" in template:
        norm = rest[1] if len(rest) > 1 else "ln1"
        return template.format(L=layer, N=norm)
    return template.format(L=layer)


class ActivationCache(Mapping[str, torch.Tensor]):
    """Activations captured by ``run_with_cache``, keyed by hook name.

    >>> cache = ActivationCache({"blocks.0.attn.hook_pattern": torch.ones(1, 2, 3, 3)}, n_layers=1)
    >>> cache["pattern", 0].shape
    torch.Size([1, 2, 3, 3])
    """

    def __init__(
        self, data: dict[str, torch.Tensor], n_layers: int | None = None, aliases: HookAliases | None = None
    ) -> None:
        self._data = dict(data)
        self.n_layers = n_layers
        self.aliases = aliases if aliases is not None else HookAliases()

    def __getitem__(self, key: str | tuple) -> torch.Tensor:
        name = self.aliases.canonical(expand_short_name(key, self.n_layers))
        try:
            return self._data[name]
        except KeyError:
            if not self._data:
                raise UnknownHookError(f"{name!r} was not cached: the cache is empty") from None
            raise UnknownHookError(
                f"{name!r} is not in this cache ({len(self._data)} hooks); "
                + unknown_hook_message(name, self._data).split("; ", 1)[1]
                + " Widen names_filter to capture it."
            ) from None

    def __contains__(self, key: object) -> bool:
        try:
            name = self.aliases.canonical(expand_short_name(key, self.n_layers))  # type: ignore[arg-type]
            return name in self._data
        except (TypeError, KeyError):
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached tensors."""
        return sum(t.nbytes for t in self._data.values())

    def to(self, device: str | torch.device) -> ActivationCache:
        """A new cache with every tensor moved to ``device``."""
        return ActivationCache({k: v.to(device) for k, v in self._data.items()}, self.n_layers, self.aliases)

    def stack(self, short: str, layers: range | None = None) -> torch.Tensor:
        """One activation stacked across layers: ``cache.stack("pattern")`` is ``[layer, batch, head, q, k]``."""
        if self.n_layers is None and layers is None:
            raise ValueError("this cache does not know the number of layers; pass layers=range(...)")
        layers = layers if layers is not None else range(self.n_layers)
        return torch.stack([self[short, layer] for layer in layers])

    def __repr__(self) -> str:
        return f"ActivationCache({len(self)} hooks, {self.nbytes / 2**20:.1f} MiB)"
