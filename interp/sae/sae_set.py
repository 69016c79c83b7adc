"""SAESet: one SAE, or several at different layers, as a sparse dictionary.

An :class:`~interp.sae.SAE` keeps SAELens's API (``sae.encode(x)`` gives the latents), so what reads any
dictionary the same way (:class:`~interp.dictionary.SparseDictionary`: features by layer, ``encode(x, layer)``
giving pre-activations and activations, decoder rows per layer written) reads SAEs through this view. A layer
is the block the SAE's input hook names (``blocks.3.hook_resid_post``: layer 3), 0 for a hook outside the
blocks (``hook_embed``), unless ``layers=`` says otherwise. An autoencoder writes the hook it reads; an SAELens
transcoder writes ``hook_name_out``. Nothing is copied: the view reads the SAEs' own parameters.

Pre-activations are affine in the input, and the output in the latents, unless the SAE normalises each input
(``normalize_activations`` ``constant_norm_rescale`` or ``layer_norm``); for those ``encoder``, ``decoder``,
``decoder_bias`` and ``decode`` raise, while ``encode`` and ``reconstruct`` work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from hooks import HookPoint
from hooks.names import layer_of
from interp.dictionary import SparseDictionary, sources
from interp.sae.latents import Code, Run
from interp.sae.module import INFERENCE, SAE, SAE_HOOKS


class SAESet:
    """SAEs by layer, as a :class:`~interp.dictionary.SparseDictionary`.

    Args:
        saes: one SAE, a list of SAEs (each at the layer its hook names) or a dict layer -> SAE.
        layers: the layer of each SAE of a list (default: the block its input hook names, or 0).

    >>> from interp.sae import SAEConfig
    >>> sae = SAE(SAEConfig(d_in=4, d_sae=8, architecture="topk", k=2, hook_name="blocks.1.hook_resid_post"))
    >>> saes = SAESet(sae)
    >>> saes.layers, saes.input_hook(1), saes.output_layers(1), saes.n_features(1)
    ([1], 'blocks.1.hook_resid_post', [1], 8)
    >>> saes.decoder(1, torch.tensor([0, 5])).shape
    torch.Size([2, 1, 4])
    """

    def __init__(self, saes: SAE | Sequence[SAE] | Mapping[int, SAE], *, layers: Sequence[int] | None = None):
        if isinstance(saes, Mapping):
            if layers is not None:
                raise ValueError("layers= is for a list of SAEs; a dict already gives each SAE's layer")
            keys, listed = list(saes), list(saes.values())
        else:
            listed = [saes] if isinstance(saes, SAE) else list(saes)
            if layers is not None and len(layers) != len(listed):
                raise ValueError(f"layers={list(layers)} names {len(layers)} layers for {len(listed)} SAEs")
            keys = None if layers is None else [int(x) for x in layers]
        if not listed:
            raise ValueError("an SAESet needs at least one SAE")
        for sae in listed:
            _check_hooks(sae)
        by_layer: dict[int, SAE] = {}
        for layer, sae in zip(keys or [_layer(sae) for sae in listed], listed, strict=True):
            if layer in by_layer:
                raise ValueError(
                    f"two SAEs are at layer {layer} ({by_layer[layer].cfg.hook_name!r} and "
                    f"{sae.cfg.hook_name!r}); an SAESet holds one SAE per layer (pass layers= to say which)"
                )
            by_layer[layer] = sae
        self.saes = {layer: by_layer[layer] for layer in sorted(by_layer)}
        self.layers = list(self.saes)
        first = self.saes[self.layers[0]]
        for layer, sae in self.saes.items():
            if (sae.d_in, sae.d_out) != (first.d_in, first.d_out):
                raise ValueError(
                    f"the SAE of layer {layer} maps d_in={sae.d_in} to d_out={sae.d_out}, that of layer "
                    f"{self.layers[0]} d_in={first.d_in} to d_out={first.d_out}; an SAESet's SAEs share widths"
                )
        self.d_in, self.d_out = first.d_in, first.d_out

    def __repr__(self) -> str:
        return f"SAESet({ {layer: sae.cfg.hook_name for layer, sae in self.saes.items()} })"

    @property
    def device(self) -> torch.device:
        """Where the first SAE's parameters are (the device a splice and an evaluation compute on)."""
        return self.saes[self.layers[0]].device

    def activation_of(self, layer: int) -> str:
        """The activation the SAE of ``layer`` runs at inference (``relu``, ``jumprelu`` or ``topk``; an SAE
        trained with BatchTopK runs as a JumpReLU)."""
        return INFERENCE[self.sae(layer).cfg.architecture]

    def sae(self, layer: int) -> SAE:
        """The SAE of ``layer``."""
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int, got {type(layer).__name__} {layer!r}")
        if layer not in self.saes:
            raise KeyError(f"the SAESet has no SAE at layer {layer}; its layers are {self.layers}")
        return self.saes[layer]

    def n_features(self, layer: int) -> int:
        return self.sae(layer).d_sae

    def input_hook(self, layer: int) -> str:
        return self.sae(layer).cfg.hook_name

    def output_layers(self, layer: int) -> list[int]:
        self.sae(layer)
        return [layer]

    def output_hook(self, out_layer: int) -> str:
        return self.sae(out_layer).hook_name_out

    def encode(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pre, acts)`` ``[..., d_sae]`` of the input hook's tensor, past the SAE's hook points."""
        sae = self.sae(layer)
        pre = sae.pre_acts(x)
        return pre, sae.activate(pre)

    def encoder(self, layer: int, features: torch.Tensor) -> torch.Tensor:
        """``[n, d_in]``: ``W_enc``'s columns (times the decoder norms where TopK ranks by them)."""
        sae = self._affine(layer, "encoder rows")
        features = features.to(sae.device)
        rows = sae.W_enc.T[features]  # [n, d_in]
        if sae.cfg.rescale_acts_by_decoder_norm:
            rows = rows * sae.W_dec.norm(dim=-1)[features, None]
        return rows

    def decoder(self, layer: int, features: torch.Tensor | None = None) -> torch.Tensor:
        """``[n, 1, d_out]``: ``W_dec``'s rows as one unit of each latent writes them (divided by the decoder
        norm, times the fine-tuning scale, where the config says so)."""
        sae = self._affine(layer, "decoder rows")
        index = torch.arange(sae.d_sae, device=sae.device) if features is None else features.to(sae.device)
        rows = sae.W_dec[index]  # [n, d_out]
        if sae.cfg.rescale_acts_by_decoder_norm:
            rows = rows / sae.W_dec.norm(dim=-1)[index, None]
        if sae.cfg.finetuning_scaling_factor:
            rows = rows * sae.finetuning_scaling_factor[index, None]
        return rows[:, None, :]

    def decoder_bias(self, out_layer: int) -> torch.Tensor:
        return self._affine(out_layer, "a decoder bias").b_dec

    def skip(self, x: torch.Tensor, out_layer: int) -> torch.Tensor | None:
        sae = self.sae(out_layer)
        if not sae.cfg.skip:
            return None
        return sae.skip_write(x)

    def decode(self, acts: Mapping[int, torch.Tensor], out_layer: int) -> torch.Tensor:
        """``acts[out_layer] @ W_dec + b_dec`` (as :meth:`decoder` scales the rows), no skip term."""
        sae = self._affine(out_layer, "a decode without its input")
        (layer,) = sources(self, out_layer)
        if layer not in acts:
            raise KeyError(f"decoding layer {out_layer} needs the activations of layer {layer}")
        return sae.decoder_write(acts[layer])

    def reconstruct(self, inputs: Mapping[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        """``{layer: the SAE's output}`` for each given input, past the SAE's hook points."""
        return {layer: self.sae(layer).output(x, hooked=False)[0] for layer, x in inputs.items()}

    # -- what a splice needs (interp.sae.splice) -----------------------------------------------------------

    def hook_points(self, layer: int) -> dict[str, HookPoint]:
        """The SAE's own hook points (``hook_sae_input`` ... ``hook_sae_output``): spliced, they are listed under
        the model's names, and ``sae.run_with_cache`` sees the same points standalone."""
        sae = self.sae(layer)
        return {name: getattr(sae, name) for name in SAE_HOOKS}

    def hooked_encode(self, x: torch.Tensor, layer: int, points: dict[str, HookPoint], run: Run) -> Code:
        """The code of the input hook's tensor through the SAE's input and latent hook points (``points`` are
        :meth:`hook_points`, which the SAE's own computation passes through): a TopK code kept as its k active
        latents unless something reads the dense one (:mod:`interp.sae.latents`)."""
        sae = self.sae(layer)
        return sae.hooked_encode(x.to(sae.device), run)

    def hooked_decode(
        self, codes: Mapping[int, Code], out_layer: int, points: dict[str, HookPoint], run: Run
    ) -> torch.Tensor:
        """The SAE's output from the code of its layer, through ``hook_sae_recons`` (in the input's shape: heads
        again for ``hook_z``)."""
        (layer,) = sources(self, out_layer)
        return self.sae(layer).hooked_decode(codes[layer], run)

    def _affine(self, layer: int, what: str) -> SAE:
        sae = self.sae(layer)
        mode = sae.cfg.normalize_activations
        if mode in ("constant_norm_rescale", "layer_norm"):
            raise ValueError(
                f"the SAE at {sae.cfg.hook_name!r} normalises each input (normalize_activations={mode!r}), so it "
                f"has no fixed {what}; use encode and reconstruct, which take the input"
            )
        return sae


def as_dictionary(dictionary: Any) -> SparseDictionary:
    """``dictionary`` as a :class:`~interp.dictionary.SparseDictionary`: an :class:`~interp.sae.SAE` as an
    :class:`SAESet` of one (its layer the block of the hook it reads), any other dictionary as it is.

    Raises:
        TypeError: neither an SAE nor a sparse dictionary.
    """
    if isinstance(dictionary, SAE):
        return SAESet(dictionary)
    if isinstance(dictionary, SparseDictionary):
        return dictionary
    raise TypeError(
        "expected a sparse dictionary (an interp.sae.SAE or SAESet, a TranscoderSet or a CrossLayerTranscoder), "
        f"got {type(dictionary).__name__}"
    )


def _check_hooks(sae: SAE) -> None:
    if not isinstance(sae, SAE):
        raise TypeError(f"expected an interp.sae.SAE, got {type(sae).__name__}")
    for what, name in (("hook_name", sae.cfg.hook_name), ("hook_name_out", sae.hook_name_out)):
        if name is None:
            raise ValueError(
                f"the SAE has no {what}: its files do not say which hook it reads; load it with "
                f"interp.sae.load(path, {what}='blocks.L.hook_resid_post') or similar"
            )


def _layer(sae: SAE) -> int:
    """The block the SAE's input hook names; 0 for a hook outside the blocks."""
    layer = layer_of(sae.cfg.hook_name)
    return 0 if layer is None else int(layer)
