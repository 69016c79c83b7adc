"""The one view of a dictionary that the dashboards read: per layer, the hook it reads, encode, decoder rows.

An SAE (:class:`~interp.sae.SAE`, also a single-layer transcoder) and a transcoder (a per-layer set, with or
without skip, or a cross-layer transcoder: :class:`~interp.sae.transcoder.Transcoder`) are read through
:class:`Dictionary`, so the pass has one code path. Features are numbered as circuit-tracer numbers them: a
layer (an SAE's is the block of the hook it reads) and an index in it, paired into ``featureIndex`` by the
Cantor pairing.

The logits a feature moves are read from the decoder row into the *last* layer it writes: an SAE's or a
per-layer transcoder's only row, a cross-layer transcoder's row into the model's last layer (see
``docs/dashboards.md`` for why).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

_BLOCK = re.compile(r"^blocks\.(\d+)\.")


def cantor(layer: int, feature: int) -> int:
    """The ``featureIndex`` circuit-tracer gives feature ``feature`` of ``layer`` (its graph nodes' ``feature``)."""
    return (layer + feature) * (layer + feature + 1) // 2 + feature


@dataclass(frozen=True)
class Dictionary:
    """A dictionary as the dashboards see it.

    Attributes:
        module: the SAE or transcoder.
        kind: ``"sae"``, ``"transcoders"`` (a per-layer set) or ``"cross-layer transcoder"``.
        layers: the layers with features.
        width: features per layer.
    """

    module: Any
    kind: str
    layers: tuple[int, ...]
    width: int

    def only(self, layers: Iterable[int]) -> Dictionary:
        """The same dictionary read at ``layers`` only (a pass over chosen features reads no other layer)."""
        return replace(self, layers=tuple(sorted(layers)))

    def input_hook(self, layer: int) -> str:
        """The hook the features of ``layer`` read."""
        if self.kind == "sae":
            return self.module.cfg.hook_name
        return self.module.input_hook(layer)

    def encode(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """Activations ``[rows, width]`` of inputs ``x`` (rows of the input hook)."""
        if self.kind == "sae":
            return self.module.encode(x)
        return self.module.encode(x, layer)[1]

    def logit_rows(self, layer: int, features: torch.Tensor) -> torch.Tensor | None:
        """``[n, d]``: the decoder rows of ``features`` into the last layer they write; ``None`` for an SAE whose
        output is not a vector of the stream (e.g. one read at ``hook_z``)."""
        if self.kind == "sae":
            if self.module.cfg.reshape_activations == "hook_z":
                return None
            return self.module.W_dec[features.to(self.module.W_dec.device)]
        return self.module.decoder(layer, features)[:, -1]  # [n, d_model], the last layer written

    def output_hook(self, layer: int) -> str:
        """The hook whose space :meth:`logit_rows` lie in."""
        if self.kind == "sae":
            return self.module.hook_name_out
        return self.module.output_hook(self.module.output_layers(layer)[-1])

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    def fingerprint(self) -> str:
        """sha256 of the kind, the layers and each parameter's name, shape, dtype and first values."""
        h = hashlib.sha256(f"{self.kind}:{self.layers}:{self.width}".encode())
        for name, param in self.module.named_parameters():
            h.update(f"{name}:{tuple(param.shape)}:{param.dtype}".encode())
            head = param.detach().reshape(-1)[:4096].cpu().contiguous()
            h.update(head.view(torch.uint8).numpy().tobytes())
        return h.hexdigest()

    def check_fits(self, model: Any) -> None:
        """Raise before any long work when the dictionary cannot read ``model``: an unknown hook, or a width
        that is not the hook's."""
        if self.kind != "sae":
            from interp.sae.transcoder import check_transcoder_fits

            check_transcoder_fits(model, self.module)
            return
        from hooks.names import UnknownHookError, unknown_hook_message

        hook = self.input_hook(self.layers[0])
        if hook not in model.hook_dict:
            raise UnknownHookError("the SAE's input hook: " + unknown_hook_message(hook, model.hook_dict))
        ids = torch.zeros(
            (1, 2), dtype=torch.long, device=model.device if hasattr(model, "device") else "cpu"
        )
        with torch.no_grad():
            _, cache = model.run_with_cache(ids, names_filter=[hook])
        shape = tuple(cache[hook].shape[2:])
        sae = self.module
        width = (
            shape[-2] * shape[-1]
            if sae.cfg.reshape_activations == "hook_z" and len(shape) == 2
            else shape[-1]
        )
        if width != sae.d_in:
            raise ValueError(
                f"the SAE reads {hook!r} with d_in={sae.d_in}, but this model's {hook!r} has width {width} "
                f"(shape {shape}); use an SAE trained on this model"
            )


def as_dictionary(module: Any) -> Dictionary:
    """The :class:`Dictionary` view of an SAE or a transcoder."""
    from interp.sae.module import SAE
    from interp.sae.transcoder import CrossLayerTranscoder, Transcoder

    if isinstance(module, Dictionary):
        return module
    if isinstance(module, SAE):
        hook = module.cfg.hook_name or ""
        found = _BLOCK.match(hook)
        if found is None and hook not in ("hook_embed", "hook_pos_embed"):
            raise ValueError(
                f"dashboards number an SAE's features by the block of the hook it reads, and {hook!r} is in "
                "no block; give an SAE that reads a 'blocks.L....' hook or the embeddings"
            )
        return Dictionary(module, "sae", (int(found.group(1)) if found else 0,), module.d_sae)
    if isinstance(module, Transcoder):
        kind = "cross-layer transcoder" if isinstance(module, CrossLayerTranscoder) else "transcoders"
        return Dictionary(module, kind, tuple(module.layers), module.d_transcoder)
    raise TypeError(
        f"expected an interp.sae.SAE or a transcoder (TranscoderSet, CrossLayerTranscoder), got {type(module).__name__}"
    )


def is_transcoder_folder(folder: Path) -> bool:
    """Whether ``folder`` holds transcoders :func:`interp.sae.load_transcoders` reads (not an SAE)."""
    from interp.sae.formats import circuit_tracer, circuit_tracer_clt

    return folder.is_dir() and (
        (folder / circuit_tracer.CONFIG).is_file()
        or circuit_tracer_clt.is_clt_folder(folder)
        or (folder / "layer_0.safetensors").is_file()
    )


def load_dictionary(path: str | Path, model: Any) -> Dictionary:
    """Read the SAE or transcoders at ``path`` for ``model`` (on its device and dtype) and check they fit it."""
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"--dictionary {path} does not exist; give an SAE or transcoder folder")
    if is_transcoder_folder(path):
        from interp.sae.formats.transcoders import load_transcoders

        module = load_transcoders(path, model=model, device=model.device, dtype=model.dtype)
    else:
        from interp.sae.formats import load

        module = load(path, device=model.device, dtype=model.dtype)
    view = as_dictionary(module)
    view.check_fits(model)
    return view
