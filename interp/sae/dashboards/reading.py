"""What a dashboard pass reads of a dictionary: any :class:`~interp.dictionary.SparseDictionary`, one code path.

An SAE, a per-layer transcoder set (with or without skip), a cross-layer transcoder: the pass reads each
through the interface they share (``layers``, ``n_features``, ``input_hook``, ``encode``, ``decoder``,
``output_layers``, ``output_hook``); a bare :class:`~interp.sae.SAE` is read as an :class:`~interp.sae.SAESet`.
Features are numbered as circuit-tracer numbers them: a layer (an SAE's is the block of the hook it reads) and
an index in it (:class:`~interp.feature_id.FeatureId`). A :class:`Reading` is the dictionary, the layers a
pass reads (all, or those of the chosen features), their input hooks and widths, and the device it computes on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from interp.dictionary import SparseDictionary
from interp.feature_id import FeatureId
from interp.sae.dashboards.collector import Collector, Settings
from interp.sae.sae_set import as_dictionary  # noqa: F401 (the package's name for it)


def fixed_rows(read: Any, layer: int, features: torch.Tensor) -> torch.Tensor | None:
    """``read(layer, features)`` (a dictionary's ``encoder`` or ``decoder`` rows), or ``None`` for a dictionary
    without fixed rows (:class:`~interp.sae.SAESet` raises ``ValueError`` for an SAE that normalises its input)."""
    try:
        with torch.no_grad():
            return read(layer, features)
    except ValueError:
        return None


def device_of(dictionary: SparseDictionary, model: Any = None) -> torch.device:
    """Where the dictionary computes: its decoder's (or encoder's) device, or else the model's."""
    layer, first = dictionary.layers[0], torch.zeros(1, dtype=torch.long)
    for read in (dictionary.decoder, dictionary.encoder):
        rows = fixed_rows(read, layer, first)
        if rows is not None:
            return rows.device
    return torch.device(getattr(model, "device", "cpu"))


def choose_features(
    dictionary: SparseDictionary, features: Iterable[FeatureId | tuple[int, int]] | None
) -> dict[int, torch.Tensor]:
    """Features (:class:`~interp.feature_id.FeatureId` or ``(layer, feature)`` pairs) as layer -> sorted features
    (``{}`` for all); each checked against the dictionary. The pass then reads only the layers named.

    Raises:
        ValueError: a layer without features, or a feature outside ``[0, n_features(layer))``.
    """
    if features is None:
        return {}
    chosen: dict[int, set[int]] = {}
    for given in features:
        fid = given if isinstance(given, FeatureId) else FeatureId(*map(int, given))
        if fid.layer not in dictionary.layers:
            raise ValueError(
                f"--features {fid}: the dictionary has no features at layer {fid.layer}; its layers are "
                f"{list(dictionary.layers)}"
            )
        width = dictionary.n_features(fid.layer)
        if not fid.feature < width:
            raise ValueError(
                f"--features {fid}: feature {fid.feature} is outside [0, {width}) (the dictionary has {width} "
                f"features at layer {fid.layer}); give one below {width}"
            )
        chosen.setdefault(fid.layer, set()).add(fid.feature)
    if not chosen:
        raise ValueError("--features is empty; give LAYER:FEATURE pairs such as 3:17,5:2")
    return {layer: torch.tensor(sorted(found)) for layer, found in chosen.items()}


@dataclass(frozen=True)
class Reading:
    """What a pass reads of a dictionary: the layers (all, or those of the chosen features), each layer's
    input hook and number of features, the chosen features, and where the dictionary computes."""

    dictionary: SparseDictionary
    layers: list[int]
    hooks: dict[int, str]
    widths: dict[int, int]
    chosen: dict[int, torch.Tensor]
    device: torch.device

    @classmethod
    def of(
        cls, dictionary: Any, features: Iterable[FeatureId | tuple[int, int]] | None, model: Any = None
    ) -> Reading:
        """The reading of ``dictionary`` (any :class:`~interp.dictionary.SparseDictionary`, or an SAE) for
        ``features`` (``None``: every feature)."""
        dictionary = as_dictionary(dictionary)
        chosen = choose_features(dictionary, features)
        layers = sorted(chosen) if chosen else list(dictionary.layers)
        return cls(
            dictionary,
            layers,
            {layer: dictionary.input_hook(layer) for layer in layers},
            {layer: dictionary.n_features(layer) for layer in layers},
            chosen,
            device_of(dictionary, model),
        )

    def collector(self, settings: Settings) -> Collector:
        """An empty :class:`Collector` for this reading."""
        return Collector(self.layers, self.widths, settings, self.chosen, self.device)
