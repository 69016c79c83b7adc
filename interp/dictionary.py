"""SparseDictionary: the interface of every dictionary whose features read one hook and write another.

An SAE reads a hook and writes it back; a transcoder reads a layer's MLP input and writes its output; a
cross-layer transcoder's features read one layer and write that layer and every later one. Whatever reads
features (a splice, QK attribution, an attribution graph, a feature dashboard) needs the same few things of
each, per layer, and nothing of how the weights are stored:

- ``layers``: the layers that have features, ascending; ``n_features(layer)`` of them at each;
- ``input_hook(layer)``: the hook its features read; ``output_layers(layer)``: the layers they write, and
  ``output_hook(out_layer)``: the hook written there;
- ``encode(x, layer)``: pre-activations and activations from the input hook's tensor (a cached one will do);
- ``encoder(layer, features)``: the gradient of each pre-activation with respect to the input (its encoder
  row); ``decoder(layer, features)``: each feature's write per unit of activation into every layer of
  ``output_layers(layer)`` (the directions whose logits a dashboard reads);
- ``decode(acts, out_layer)``: every source layer's write plus ``decoder_bias(out_layer)``; ``skip(x,
  out_layer)``: the linear skip term, or ``None``; ``reconstruct(inputs)``: decode plus skip.

It is a :class:`typing.Protocol` (nothing inherits from it), placed below every package that reads
dictionaries, so ``interp.analysis`` types against it as well as ``interp.circuits``. The functions below are
written once over it: which layers feed a layer (:func:`sources`), every layer written
(:func:`written_layers`), every feature in one order (:func:`features`), and whether a dictionary fits a model
(:func:`check_fits`). Implementations: :class:`interp.sae.TranscoderSet`, :class:`interp.sae.CrossLayerTranscoder`,
:class:`interp.sae.SAESet` (one SAE, or several at different layers) and :class:`interp.sae.lorsa.Lorsa` (sparse
attention heads, whose inputs are whole sequences ``[batch, pos, d_model]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from hooks.names import UnknownHookError, unknown_hook_message


@runtime_checkable
class SparseDictionary(Protocol):
    """Features by layer, each layer reading one hook and writing one hook per output layer.

    Attributes:
        layers: the layers with features, ascending.
        d_in: width of the tensor each input hook holds (for ``hook_z``, heads flattened: ``n_heads * d_head``).
        d_out: width of the tensor each output hook holds.
    """

    layers: Sequence[int]
    d_in: int
    d_out: int

    def n_features(self, layer: int) -> int:
        """The number of features of ``layer``."""
        ...

    def input_hook(self, layer: int) -> str:
        """The hook the features of ``layer`` read, e.g. ``blocks.3.ln2.hook_normalized``."""
        ...

    def output_layers(self, layer: int) -> list[int]:
        """The layers the features of ``layer`` write to, ascending (``[layer]`` unless cross-layer)."""
        ...

    def output_hook(self, out_layer: int) -> str:
        """The hook written at ``out_layer``, e.g. ``blocks.3.hook_mlp_out``."""
        ...

    def encode(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pre, acts)``, both ``[..., n_features(layer)]``, for the input hook's tensor ``x`` at ``layer``."""
        ...

    def encoder(self, layer: int, features: torch.Tensor) -> torch.Tensor:
        """``[n, d_in]``: the derivative of each pre-activation of ``features`` (a LongTensor) by the input."""
        ...

    def decoder(self, layer: int, features: torch.Tensor | None = None) -> torch.Tensor:
        """``[n, len(output_layers(layer)), d_out]``: what one unit of each feature (``None``: all) writes into
        each layer of ``output_layers(layer)``."""
        ...

    def decoder_bias(self, out_layer: int) -> torch.Tensor:
        """``[d_out]``: the bias added once to the output at ``out_layer``."""
        ...

    def skip(self, x: torch.Tensor, out_layer: int) -> torch.Tensor | None:
        """The skip term ``[..., d_out]`` written at ``out_layer`` from that layer's input ``x``, or ``None``."""
        ...

    def decode(self, acts: Mapping[int, torch.Tensor], out_layer: int) -> torch.Tensor:
        """The write ``[..., d_out]`` at ``out_layer`` of the activations of every layer in
        ``sources(self, out_layer)``, plus the decoder bias (no skip term)."""
        ...

    def reconstruct(self, inputs: Mapping[int, torch.Tensor]) -> dict[int, torch.Tensor]:
        """``{layer: output}``: decode plus skip at every layer the given inputs feed."""
        ...


def sources(dictionary: SparseDictionary, out_layer: int) -> list[int]:
    """The layers whose features write to ``out_layer``, ascending."""
    return [s for s in dictionary.layers if s <= out_layer and out_layer in dictionary.output_layers(s)]


def written_layers(dictionary: SparseDictionary) -> list[int]:
    """Every layer some feature writes to, ascending."""
    return sorted({out for layer in dictionary.layers for out in dictionary.output_layers(layer)})


def features(dictionary: SparseDictionary) -> Iterator[tuple[int, int]]:
    """Every ``(layer, feature)``, layer by layer and by feature within a layer: the order of graphs' nodes."""
    for layer in dictionary.layers:
        for feature in range(dictionary.n_features(layer)):
            yield layer, feature


def hook_width(model: Any, name: str) -> int | None:
    """The last-axis width of a hook of a :class:`~interp.HookedTransformer` (flattened heads for ``hook_z``),
    or ``None`` when it cannot be told from the config."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(cfg, "d_model"):
        return None
    leaf = name.rsplit(".", 1)[-1]
    d_head = getattr(cfg, "d_head", None) or cfg.d_model // cfg.n_heads
    if leaf in ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out"):
        return cfg.d_model
    if leaf in ("hook_embed", "hook_pos_embed", "hook_normalized") or name == "unembed.hook_in":
        return cfg.d_model
    if leaf in ("hook_pre", "hook_post", "hook_pre_linear") and ".mlp." in name:
        return getattr(cfg, "d_mlp", None)
    if leaf == "hook_z":
        return cfg.n_heads * d_head
    return None


def check_fits(model: Any, dictionary: SparseDictionary) -> None:
    """Raise one line before any forward when ``dictionary`` does not fit ``model``: a hook the model lacks, a
    width that differs, a layer past the model's, or an input the forward reaches after the output it feeds.

    Raises:
        TypeError: not a :class:`SparseDictionary`. UnknownHookError: a hook the model lacks (with the closest
        names). ValueError: anything else.
    """
    if not isinstance(dictionary, SparseDictionary):
        raise TypeError(
            f"expected a sparse dictionary (an interp.sae.TranscoderSet, CrossLayerTranscoder or SAESet), got "
            f"{type(dictionary).__name__}"
        )
    what = type(dictionary).__name__
    _check_layers(model, dictionary, what)
    order = {name: i for i, name in enumerate(model.hook_dict)}
    for layer in dictionary.layers:
        read = dictionary.input_hook(layer)
        _check_hook(model, what, f"input hook of layer {layer}", read, "d_in", dictionary.d_in)
        for out in dictionary.output_layers(layer):
            written = dictionary.output_hook(out)
            _check_hook(model, what, f"output hook of layer {out}", written, "d_out", dictionary.d_out)
            if order[read] > order[written]:
                raise ValueError(
                    f"the {what} reads {read!r}, which the forward reaches after the hook it writes, "
                    f"{written!r}; a dictionary must read a hook that comes first"
                )


def _check_layers(model: Any, dictionary: SparseDictionary, what: str) -> None:
    n_layers = getattr(getattr(model, "cfg", None), "n_layers", None)
    if n_layers is None or not dictionary.layers:
        return
    last = max(max(dictionary.layers), written_layers(dictionary)[-1])
    if last >= n_layers:
        raise ValueError(
            f"the {what} has features at layers up to {last}, the model has n_layers={n_layers} (layers "
            f"0..{n_layers - 1})"
        )


def _check_hook(model: Any, what: str, role: str, name: str, width_name: str, width: int) -> None:
    if name not in model.hook_dict:
        if name.endswith((".mlp.hook_in", ".mlp.hook_out")):
            raise ValueError(
                f"the {what}'s {role} is {name!r}, a TransformerLens hook interp has no point for; load it "
                "with interp.sae.load_transcoders(path, model=model), which maps it onto this model's hooks"
            )
        raise UnknownHookError(f"the {what}'s {role}: " + unknown_hook_message(name, model.hook_dict))
    have = hook_width(model, name)
    if have is not None and have != width:
        raise ValueError(
            f"the {what} has {width_name}={width} at {name!r}, but that hook of this model has width {have}; "
            "use a dictionary trained on this model"
        )
