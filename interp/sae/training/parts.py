"""What a training step trains, viewed layer by layer: an SAE as one layer whose output is its input.

The step (:mod:`.step`) is written once over ``n`` layers of stacked parameters (``W_enc [n, f, d_in]``, ``b_enc
[n, f]``, decoders, ``b_dec [n, d_out]``, an optional ``W_skip [n, d_out, d_in]``), as a transcoder set holds
them. A cross-layer transcoder's decoders are one tensor per source layer ``[f, n - src, d_out]``. An SAE is the
case ``n = 1`` where the output to predict is the input itself (an autoencoder) and, where its config says so,
``b_dec`` is subtracted from the input before encoding; its parameters (``W_enc [d_in, f]``, ``W_dec [f, d]``)
are read through views, so the gradients land in the SAE's own parameters.

Each view lists the parameters in the order a checkpoint stores them (``param.0``, ``param.1``, ...), the order
each kind has always had, so checkpoints written before the step was one still resume.
"""

from __future__ import annotations

import torch
from torch import nn

from interp.sae.module import SAE
from interp.sae.transcoder import CrossLayerTranscoder, Transcoder


class SAEParts:
    """An SAE as one layer of the step."""

    n_layers = 1
    clt = False
    autoencoder = True

    def __init__(self, sae: SAE) -> None:
        self.module = sae
        self.rectify = sae.rectify
        self.records_threshold = sae.cfg.architecture == "batchtopk"  # run as a JumpReLU at inference
        self.d_out, self.n_features = sae.d_out, sae.d_sae

    @property
    def w_enc(self) -> torch.Tensor:
        return self.module.W_enc.T[None]  # [1, d_sae, d_in]

    @property
    def b_enc(self) -> torch.Tensor:
        return self.module.b_enc[None]  # [1, d_sae]

    @property
    def w_dec(self) -> torch.Tensor:
        return self.module.W_dec[None]  # [1, d_sae, d_in]

    @property
    def b_dec(self) -> torch.Tensor:
        return self.module.b_dec[None]  # [1, d_in]

    @property
    def w_skip(self) -> None:
        return None

    @property
    def centre(self) -> torch.Tensor | None:
        """``[d_in]`` subtracted from the input before encoding, or ``None``."""
        return self.module.b_dec if self.module.cfg.apply_b_dec_to_input else None

    def decoders(self) -> list[nn.Parameter]:
        """The decoder parameters whose features are kept at unit norm."""
        return [self.module.W_dec]

    def parameters(self) -> list[nn.Parameter]:
        sae = self.module
        return [sae.W_enc, sae.b_enc, sae.W_dec, sae.b_dec]


class TranscoderParts:
    """A transcoder set or cross-layer transcoder, whose parameters are stacked by layer already."""

    autoencoder = False
    records_threshold = False  # a transcoder runs BatchTopK as it trained it
    centre = None

    def __init__(self, tc: Transcoder) -> None:
        self.module = tc
        self.clt = isinstance(tc, CrossLayerTranscoder)
        self.rectify = tc.rectify
        self.n_layers, self.d_out, self.n_features = len(tc.layers), tc.d_model, tc.d_transcoder

    @property
    def w_enc(self) -> torch.Tensor:
        return self.module.W_enc

    @property
    def b_enc(self) -> torch.Tensor:
        return self.module.b_enc

    @property
    def w_dec(self) -> torch.Tensor | nn.ParameterList:
        return self.module.W_dec

    @property
    def b_dec(self) -> torch.Tensor:
        return self.module.b_dec

    @property
    def w_skip(self) -> torch.Tensor | None:
        return self.module.W_skip

    def decoders(self) -> list[nn.Parameter]:
        """One decoder parameter per source layer (a set's stacked one counts once)."""
        return list(self.module.W_dec) if self.clt else [self.module.W_dec]

    def parameters(self) -> list[nn.Parameter]:
        tc = self.module
        params = [tc.W_enc, tc.b_enc, tc.b_dec, *self.decoders()]
        return params + ([tc.W_skip] if tc.W_skip is not None else [])


def parts(dictionary: SAE | Transcoder) -> SAEParts | TranscoderParts:
    """The view of ``dictionary`` a step trains."""
    return SAEParts(dictionary) if isinstance(dictionary, SAE) else TranscoderParts(dictionary)
