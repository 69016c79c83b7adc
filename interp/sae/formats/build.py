"""Checked construction of an SAE from a config and tensors in SAELens's names, whatever file they came from.

Every format reader ends here, so a config that disagrees with its weights (a ``d_sae`` of 16384 next to a
``W_enc`` with 4096 columns) is refused the same way everywhere, naming both values.
"""

from __future__ import annotations

from typing import Any

import torch

from interp.sae.config import SAEConfig
from interp.sae.module import SAE


def rebuilt(sae: SAE, **changes: Any) -> SAE:
    """A new SAE with ``sae``'s weights and its config changed by ``changes`` (hook names, normalisation),
    on ``sae``'s device."""
    import dataclasses

    out = SAE(dataclasses.replace(sae.cfg, **changes)).to(sae.device)
    out.load_state_dict(sae.state_dict())
    return out


class SAEFormatError(ValueError):
    """A dictionary's files are unreadable, of an unknown format, or disagree with each other."""


def config_error(message: str) -> SAEFormatError:
    return SAEFormatError(message)


def expected_shapes(cfg: SAEConfig) -> dict[str, tuple[int, ...]]:
    """The shape of every parameter an SAE with this config has."""
    d_in, d_sae, d_out = cfg.d_in, cfg.d_sae, cfg.width_out
    shapes = {"W_enc": (d_in, d_sae), "b_enc": (d_sae,), "W_dec": (d_sae, d_out), "b_dec": (d_out,)}
    if cfg.has_threshold:
        shapes["threshold"] = (d_sae,)
    if cfg.skip:
        shapes["W_skip"] = (d_out, d_in)
    if cfg.finetuning_scaling_factor:
        shapes["finetuning_scaling_factor"] = (d_sae,)
    return shapes


def build_sae(
    cfg: SAEConfig, tensors: dict[str, torch.Tensor], source: str, *, device: Any = None, dtype: Any = None
) -> SAE:
    """An SAE holding ``tensors``, after checking that names and shapes match ``cfg``.

    Raises:
        SAEFormatError: a tensor is missing, unexpected, or of a shape other than the config implies.
    """
    shapes = expected_shapes(cfg)
    missing = sorted(set(shapes) - set(tensors))
    if missing:
        raise SAEFormatError(
            f"{source} has no {', '.join(missing)}; an SAE of this config needs {sorted(shapes)}"
        )
    extra = sorted(set(tensors) - set(shapes))
    if extra:
        raise SAEFormatError(
            f"{source} holds {', '.join(extra)}, which an SAE of architecture {cfg.architecture!r} "
            f"(transcoder={cfg.transcoder}, skip={cfg.skip}) does not have; is the config from another SAE?"
        )
    for name, want in shapes.items():
        got = tuple(tensors[name].shape)
        if got != want:
            raise SAEFormatError(
                f"{source}: {name} has shape {list(got)}, but the config (d_in={cfg.d_in}, d_sae={cfg.d_sae}"
                f"{f', d_out={cfg.width_out}' if cfg.transcoder else ''}) implies {list(want)}"
            )
    if dtype is not None:
        import dataclasses

        cfg = dataclasses.replace(cfg, dtype=str(dtype).removeprefix("torch."))
    sae = SAE(cfg)
    with torch.no_grad():
        for name, value in tensors.items():
            getattr(sae, name).copy_(value.to(getattr(sae, name).dtype))
    return sae.to(device) if device is not None else sae
