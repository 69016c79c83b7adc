"""``sae_lens.SAE``: interp's :class:`~interp.sae.SAE` answering to SAELens 6's API.

The module is interp's SAE itself (the same parameters, hook points and encode/decode, which follow SAELens's
inference code), with what SAELens code calls around it: ``SAE.load_from_disk(path)``, ``SAE.from_pretrained
(release, sae_id)`` (:mod:`interp.compat.sae_lens.pretrained`), ``SAE.from_dict(cfg_dict)``, ``save_model``,
``cfg`` in SAELens's layout (:mod:`interp.compat.sae_lens.config`), ``use_error_term``, and ``decode(acts)``
without the input. Where decoding needs the input (``constant_norm_rescale`` and ``layer_norm``
normalisation, a skip connection, ``hook_z`` heads), SAELens keeps what it needs from the last ``encode`` on
the module; so does this face, for one ``decode``, when ``decode`` is not given the input.

``forward`` with ``use_error_term`` adds the error ``x - decode(encode(x))`` computed without the SAE's hooks
(through ``hook_sae_error``), as SAELens's does, so edits to latents show through while the output is otherwise
the input. Splicing into a model goes through interp's ``model.saes`` (:mod:`interp.compat.sae_lens.model`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

import interp.sae
from interp.compat.sae_lens.config import SAELensConfig, SAEMetadata, from_interp, metadata_of, moved
from interp.store.files import write_json

CFG = "cfg.json"
WEIGHTS = "sae_weights.safetensors"
SPARSITY = "sparsity.safetensors"


class SAE(interp.sae.SAE):
    """interp's SAE with SAELens 6's methods (see the module docstring)."""

    use_error_term: bool = False

    # -- loading --------------------------------------------------------------------------------------

    @classmethod
    def from_interp(cls, sae: interp.sae.SAE) -> SAE:
        """This face on an interp SAE: the same module (nothing copied), its config in SAELens's layout."""
        if not isinstance(sae, interp.sae.SAE):
            raise TypeError(f"from_interp takes an interp SAE, got {type(sae).__name__}")
        sae.__class__ = cls
        sae.cfg = from_interp(sae.cfg, sae.W_enc.device)
        return sae

    @classmethod
    def load_from_disk(
        cls, path: str | Path, device: str = "cpu", dtype: str | None = None, fold_W_dec_norm: bool = False
    ) -> SAE:
        """Load the SAE in ``path``: a SAELens folder (``cfg.json`` and ``sae_weights.safetensors``), or any
        folder or file :func:`interp.sae.load` reads (sparsify, Gemma Scope)."""
        path = Path(path)
        sae = cls.from_interp(interp.sae.load(path, device=device, dtype=dtype))
        config = path / CFG if path.is_dir() else path.with_name(CFG)
        if config.is_file():  # SAELens's own record of what the SAE was trained on
            recorded = json.loads(config.read_text(encoding="utf-8"))
            if isinstance(recorded, dict):
                sae.cfg.metadata.update(
                    {k: v for k, v in metadata_of(recorded).items() if k not in ("hook_name", "model_name")}
                )
        if fold_W_dec_norm:
            sae.fold_W_dec_norm()
        return sae

    load_from_pretrained = load_from_disk

    @classmethod
    def from_pretrained(
        cls, release: str, sae_id: str, device: str = "cpu", dtype: str = "float32", **kwargs: Any
    ) -> SAE:
        """The SAE ``sae_id`` of ``release``, found on this machine (see :mod:`interp.compat.sae_lens.pretrained`)."""
        return cls.from_pretrained_with_cfg_and_sparsity(release, sae_id, device, dtype, **kwargs)[0]

    @classmethod
    def from_pretrained_with_cfg_and_sparsity(
        cls, release: str, sae_id: str, device: str = "cpu", dtype: str = "float32", **kwargs: Any
    ) -> tuple[SAE, dict[str, Any], torch.Tensor | None]:
        """``(sae, cfg_dict, log_sparsity)``: :meth:`from_pretrained` plus the config as a dict and the
        folder's ``sparsity.safetensors`` (``None`` without one), as SAELens returns them."""
        from interp.compat.sae_lens.pretrained import resolve

        unknown = set(kwargs) - {"force_download", "converter", "fold_W_dec_norm"}
        if unknown or kwargs.get("converter") is not None:
            raise TypeError(
                f"from_pretrained got {sorted(unknown) or ['converter']}, which interp does not take; it reads "
                "SAELens, sparsify and Gemma Scope folders itself"
            )
        folder = resolve(release, sae_id)
        sae = cls.load_from_disk(
            folder, device=device, dtype=dtype, fold_W_dec_norm=kwargs.get("fold_W_dec_norm", False)
        )
        sparsity = None
        if (folder / SPARSITY).is_file():
            from safetensors.torch import load_file

            sparsity = load_file(folder / SPARSITY, device=str(device)).get("sparsity")
        return sae, sae.cfg.to_dict(), sparsity

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> SAE:
        """A new SAE of SAELens's ``cfg.json`` layout, initialised as SAELens initialises one: ``W_dec`` rows
        Kaiming-uniform, ``W_enc`` its transpose, biases zero."""
        cfg = SAELensConfig.from_dict(config_dict)
        sae = cls(cfg)
        with torch.no_grad():
            torch.nn.init.kaiming_uniform_(sae.W_dec)
            sae.W_enc.copy_(sae.W_dec.T)
        return sae.to(config_dict.get("device") or "cpu")

    def __init__(self, cfg: Any, use_error_term: bool = False) -> None:
        if not isinstance(cfg, SAELensConfig):
            cfg = SAELensConfig.from_dict(cfg) if isinstance(cfg, dict) else from_interp(cfg)
        super().__init__(cfg)
        self.use_error_term = use_error_term

    # -- what SAELens code calls ----------------------------------------------------------------------

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent activations ``[..., d_sae]`` of ``x`` (kept for one :meth:`decode` without the input)."""
        if self._decode_needs_input():
            self.__dict__["_last_input"] = x
        return super().encode(x)

    def decode(self, feature_acts: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The output written by ``feature_acts``; ``x`` defaults to the input of the last :meth:`encode` where
        decoding needs it."""
        if x is None and self._decode_needs_input():
            x = self.__dict__.pop("_last_input", None)
        return super().decode(feature_acts, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The reconstruction, plus the error term (``hook_sae_error``) when ``use_error_term``."""
        out, _ = self.output(x)
        if self.use_error_term:
            with torch.no_grad():
                clean, _ = self.output(x, hooked=False)
                error = self.hook_sae_error(x.to(clean.dtype) - clean)
            out = out + error
        return self.hook_sae_output(out)

    def _decode_needs_input(self) -> bool:
        c = self.cfg
        return (
            c.skip
            or c.reshape_activations == "hook_z"
            or c.normalize_activations in ("constant_norm_rescale", "layer_norm")
        )

    def to(self, *args: Any, **kwargs: Any) -> SAE:
        """Move or cast the SAE, keeping ``cfg.device`` and ``cfg.dtype`` true."""
        out = super().to(*args, **kwargs)
        dtype = str(self.W_enc.dtype).removeprefix("torch.")
        if dtype != self.cfg.dtype:
            self.cfg = dataclasses.replace(self.cfg, dtype=dtype)
        moved(self.cfg, self.W_enc.device)
        return out

    @torch.no_grad()
    def fold_W_dec_norm(self) -> None:
        """Scale each decoder row to norm 1 and its encoder column (and bias, threshold) by the norm, which
        leaves what the SAE computes unchanged for ReLU and JumpReLU, as SAELens's ``fold_W_dec_norm``."""
        if self.cfg.architecture == "topk" and not self.cfg.rescale_acts_by_decoder_norm:
            raise ValueError(
                "folding decoder norms changes which latents a TopK SAE keeps; SAELens refuses it too"
            )
        norms = self.W_dec.norm(dim=-1).clamp(min=1e-8)  # [d_sae]
        self.W_dec.div_(norms[:, None])
        self.W_enc.mul_(norms)
        self.b_enc.mul_(norms)
        if self.cfg.has_threshold:
            self.threshold.mul_(norms)

    def save_model(self, path: str | Path) -> tuple[Path, Path]:
        """Write the SAE as a SAELens 6 folder (:func:`interp.sae.save`) with this config's metadata;
        returns ``(weights path, cfg path)``."""
        folder = interp.sae.save(self, path)
        config = json.loads((folder / CFG).read_text(encoding="utf-8"))
        recorded = {k: v for k, v in self.cfg.metadata.items() if _json_value(v)}
        config["metadata"] = {
            **recorded,
            **{k: v for k, v in config.get("metadata", {}).items() if v is not None},
        }
        write_json(folder / CFG, config)
        return folder / WEIGHTS, folder / CFG

    def get_name(self) -> str:
        return f"sae_{self.cfg.metadata.model_name}_{self.cfg.metadata.hook_name}_{self.cfg.d_sae}"


def _json_value(value: Any) -> bool:
    try:
        json.dumps(value)
    except TypeError:
        return False
    return True


__all__ = ["SAE", "SAEMetadata", "SAELensConfig"]
