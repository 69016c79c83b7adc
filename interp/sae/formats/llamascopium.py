"""OpenMOSS's llamascopium (formerly lm-saes): the folders its ``save_pretrained`` writes.

A folder holds ``config.json`` (the dictionary's settings, ``sae_type`` among them) and
``sae_weights.safetensors`` (their names, reading, and the conventions every kind shares are in
:mod:`.llamascopium_files`). Four kinds are read:

- ``sae_type: "lorsa"``: low-rank sparse attention (:mod:`.llamascopium_lorsa`), as a
  :class:`~interp.sae.lorsa.Lorsa`;
- ``sae_type: "sae"`` reading and writing one hook: an :class:`~interp.sae.SAE`; reading one hook and writing
  another (``hook_point_in != hook_point_out``): a transcoder, as a one-layer :class:`~interp.sae.TranscoderSet`;
- ``sae_type: "clt"``: a :class:`~interp.sae.CrossLayerTranscoder` (llamascopium stores the decoders by output
  layer, ``W_D.{L} [L + 1, d_sae, d_model]`` from each source layer into ``L``; interp by source layer).

Hooks are named the TransformerLens way, ``blocks.L.SITE``; interp's names are the same for the hooks these
dictionaries read and write (``ln1.hook_normalized``, ``hook_attn_out``, ``ln2.hook_normalized``,
``hook_mlp_out``, ``hook_resid_*``), and :func:`interp.dictionary.check_fits` checks them against a model.

What llamascopium computes, and how it is kept:

- **Activation scale.** Trained with ``norm_activation: "dataset-wise"``, a dictionary maps ``x * f_in`` to ``y
  * f_out`` with ``f = sqrt(d_model) / norm`` from the dataset's average norms saved beside the weights
  (``dataset_average_activation_norm.HOOK``); the factors are folded into the weights here, so the dictionary
  reads and writes the model's own activations, with the activations llamascopium's inference mode gives
  (``fold_activation_scale``): an SAE's, a transcoder's and a CLT's divided by ``f_in``, a Lorsa's as trained.
  (Folded here from the function llamascopium trains, which its own folding misses in three places: an SAE's
  and a gated Lorsa's JumpReLU thresholds are left unscaled, and a gated CLT's decoder norms change unevenly
  between features when output layers have different factors.) ``"inference"`` folders have them folded
  already. ``"token-wise"`` and ``"batch-wise"`` need the target's own norm to undo the scaling and are refused.
- **Gating by the decoder norm** (``sparsity_include_decoder_norm``): a feature is chosen by ``pre *
  |W_D[f]|``. A Lorsa keeps this as a setting (its activations are llamascopium's). An SAE keeps it as SAELens's
  ``rescale_acts_by_decoder_norm`` and a transcoder or CLT has it folded into its weights (``W_enc[f]`` and
  ``b_enc[f]`` times the norm, ``W_dec[f]`` divided by it): their activations are the inference-mode ones times
  ``|W_D[f]|`` (a CLT's norm over every layer it writes, in training units), the scale SAELens reports, and
  their outputs llamascopium's.
- **Activation functions**: ReLU; JumpReLU with ``threshold = exp(log_jumprelu_threshold)``; TopK and BatchTopK,
  which pass values through a ReLU before choosing (``rectify=True`` in :mod:`interp.sae.activation`; set on
  the transcoders read here). A CLT's ``layertopk`` and ``batchlayertopk`` choose across layers at once, which
  no per-layer encoding can, and are refused; so are a GLU encoder and an SAE's ``batchtopk`` (an interp SAE
  runs BatchTopK at inference with a learned threshold, which these files do not have).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from interp.sae.config import SAEConfig
from interp.sae.formats import llamascopium_lorsa
from interp.sae.formats.build import SAEFormatError, build_sae
from interp.sae.formats.llamascopium_files import (
    CONFIG,
    d_sae,
    gated,
    is_folder,
    layer_site,
    read,
    scales,
    tensor,
    threshold,
)
from interp.sae.module import SAE
from interp.sae.transcoder import CrossLayerTranscoder, TranscoderSet

__all__ = ["CONFIG", "is_folder", "load"]  # the format's files (llamascopium_files) and the reader

Dictionary = Any
"""What a folder holds: a Lorsa, an SAE, a TranscoderSet or a CrossLayerTranscoder."""


def load(folder: str | Path, *, device: Any = None, dtype: Any = None) -> Dictionary:
    """The dictionary a llamascopium folder holds (see the module docstring), on ``device`` (default CPU) in
    ``dtype`` (default: the weights' own). Scales are folded in float64, then the weights are cast.

    Raises:
        SAEFormatError: a kind or setting interp cannot express, or weights that disagree with the config.
    """
    folder = Path(folder)
    config, tensors = read(folder)
    source = str(folder)
    stored = tensors.get("W_O", tensors.get("W_E"))
    dtype = dtype if dtype is not None else (stored.dtype if stored is not None else torch.float32)
    kind = config["sae_type"]
    if kind == "lorsa":
        out = llamascopium_lorsa.from_folder(config, tensors, source)
    elif kind == "clt":
        out = _clt(config, tensors, source)
    elif config["hook_point_in"] == config["hook_point_out"]:
        out = _sae(config, tensors, source)
    else:
        out = _transcoder(config, tensors, source)
    return out.to(device=device, dtype=dtype)


def _activation(config: dict[str, Any], source: str, kind: str) -> tuple[str, int | None]:
    """interp's activation and ``k`` for a config's ``act_fn``."""
    act = config.get("act_fn", "relu").lower()
    if act in ("layertopk", "batchlayertopk"):
        raise SAEFormatError(
            f"{source}: act_fn={act!r} chooses features across layers at once, which interp's per-layer encoding "
            "cannot express; topk, batchtopk, jumprelu and relu dictionaries are read"
        )
    if config.get("use_glu_encoder"):
        raise SAEFormatError(f"{source}: a GLU encoder (use_glu_encoder) is not read")
    if act == "batchtopk" and kind == "sae":
        raise SAEFormatError(
            f"{source}: a BatchTopK SAE runs at inference with a learned threshold in interp (as SAELens runs "
            "it), which llamascopium does not save"
        )
    if act not in ("relu", "jumprelu", "topk", "batchtopk"):
        raise SAEFormatError(f"{source}: act_fn={act!r}; expected relu, jumprelu, topk or batchtopk")
    return act, (int(config.get("top_k", 50)) if act in ("topk", "batchtopk") else None)


def _metadata(config: dict[str, Any]) -> dict[str, Any]:
    return {"format": "llamascopium", "llamascopium_config": config}


def _sae(config: dict[str, Any], tensors: dict[str, torch.Tensor], source: str) -> SAE:
    act, k = _activation(config, source, "sae")
    n, d = d_sae(config), config["d_model"]
    cfg = SAEConfig(
        d_in=d,
        d_sae=n,
        architecture="standard" if act == "relu" else act,
        k=k,
        hook_name=config["hook_point_in"],
        apply_b_dec_to_input=False,
        rescale_acts_by_decoder_norm=gated(config),
        metadata=_metadata(config),
    )
    weights = {
        "W_enc": tensor(tensors, "W_E", (d, n), source),
        "b_enc": tensor(tensors, "b_E", (n,), source),
        "W_dec": tensor(tensors, "W_D", (n, d), source),
        "b_dec": _bias(config, tensors, "b_D", d, source),
    }
    if act == "jumprelu":
        weights["threshold"] = threshold(tensors)
    sae = build_sae(cfg, weights, source, dtype=torch.float64)
    (scale,) = scales(config, tensors, [config["hook_point_in"]], source)
    return sae.fold_activation_scale(scale) if scale != 1.0 else sae


def _bias(
    config: dict[str, Any], tensors: dict[str, torch.Tensor], name: str, d: int, source: str
) -> torch.Tensor:
    if config.get("use_decoder_bias", True):
        return tensor(tensors, name, (d,), source)
    return torch.zeros(d, dtype=torch.float64)


def _transcoder(config: dict[str, Any], tensors: dict[str, torch.Tensor], source: str) -> TranscoderSet:
    act, k = _activation(config, source, "transcoder")
    n, d = d_sae(config), config["d_model"]
    hooks = [config["hook_point_in"], config["hook_point_out"]]
    (layer, input_site), (out_layer, output_site) = (layer_site(h, source) for h in hooks)
    if layer != out_layer:
        raise SAEFormatError(
            f"{source}: a transcoder reading layer {layer} and writing layer {out_layer} is not read"
        )
    f_in, f_out = scales(config, tensors, hooks, source)
    W_enc = tensor(tensors, "W_E", (d, n), source).T  # [d_transcoder, d_model]
    b_enc = tensor(tensors, "b_E", (n,), source) / f_in
    W_dec = tensor(tensors, "W_D", (n, d), source) * (f_in / f_out)
    b_dec = _bias(config, tensors, "b_D", d, source) / f_out
    thr = threshold(tensors) / f_in if act == "jumprelu" else None
    if gated(config):
        norm = tensor(tensors, "W_D", (n, d), source).norm(dim=-1)  # [d_transcoder], in training units
        W_enc, b_enc, W_dec = W_enc * norm[:, None], b_enc * norm, W_dec / norm[:, None]
    tc = TranscoderSet(
        W_enc[None],
        W_dec[None],
        b_enc[None],
        b_dec[None],
        threshold=None if thr is None else thr[None],
        activation=act,
        k=k,
        layers=[layer],
        input_site=input_site,
        output_site=output_site,
        metadata=_metadata(config),
    )
    tc.rectify = True  # llamascopium's TopK passes values through a ReLU before choosing
    return tc


def _clt(config: dict[str, Any], tensors: dict[str, torch.Tensor], source: str) -> CrossLayerTranscoder:
    act, k = _activation(config, source, "clt")
    n, d = d_sae(config), config["d_model"]
    hooks_in, hooks_out = config["hook_points_in"], config["hook_points_out"]
    n_layers = len(hooks_in)
    sites = [layer_site(h, source) for h in hooks_in], [layer_site(h, source) for h in hooks_out]
    for side, named in zip(("hook_points_in", "hook_points_out"), sites, strict=True):
        if [layer for layer, _ in named] != list(range(n_layers)) or len({site for _, site in named}) != 1:
            raise SAEFormatError(
                f"{source}: {side} must name one site at layers 0..{n_layers - 1} in order, got "
                f"{[h for h in (hooks_in if side == 'hook_points_in' else hooks_out)]}"
            )
    f_in = torch.tensor(scales(config, tensors, hooks_in, source), dtype=torch.float64)  # [n_layers]
    f_out = torch.tensor(scales(config, tensors, hooks_out, source), dtype=torch.float64)
    W_enc = tensor(tensors, "W_E", (n_layers, d, n), source).transpose(
        1, 2
    )  # [n_layers, d_transcoder, d_model]
    b_enc = tensor(tensors, "b_E", (n_layers, n), source) / f_in[:, None]
    by_output = [tensor(tensors, f"W_D.{to}", (to + 1, n, d), source) for to in range(n_layers)]
    W_dec = [
        torch.stack([by_output[to][i] * (f_in[i] / f_out[to]) for to in range(i, n_layers)], dim=1)
        for i in range(n_layers)
    ]  # per source layer i: [d_transcoder, n_layers - i, d_model]
    # a CLT always adds its biases, whatever use_decoder_bias says (llamascopium's decode)
    b_dec = torch.stack([tensor(tensors, f"b_D.{to}", (d,), source) / f_out[to] for to in range(n_layers)])
    thr = threshold(tensors) / f_in[:, None] if act == "jumprelu" else None
    if gated(config):
        # llamascopium's norm per feature: over every layer it writes, in the units it trained in
        norm = torch.stack(
            [
                sum(by_output[to][i].pow(2).sum(-1) for to in range(i, n_layers)).sqrt()
                for i in range(n_layers)
            ]
        )  # [n_layers, d_transcoder]
        W_enc, b_enc = W_enc * norm[..., None], b_enc * norm
        W_dec = [w / norm[i][:, None, None] for i, w in enumerate(W_dec)]
    clt = CrossLayerTranscoder(
        W_enc,
        W_dec,
        b_enc,
        b_dec,
        threshold=thr,
        activation=act,
        k=k,
        input_site=sites[0][0][1],
        output_site=sites[1][0][1],
        metadata=_metadata(config),
    )
    clt.rectify = True  # llamascopium's TopK passes values through a ReLU before choosing
    return clt
