"""``interp.sae.train_transcoders``: fit a transcoder set, a skip transcoder set or a CLT to a model's MLPs.

The rows are the model's MLP inputs and outputs at every layer trained, cached together from one forward per
batch (an activation store holding each layer's input and output hook, or two tensors), so one pass over the
data feeds every layer's transcoder. The loop is the SAE trainer's (:class:`~.trainer.Run`: streaming in
bounded memory, the learning-rate schedule, checkpoints that resume bit for bit, DistributedDataParallel under
``torchrun``); :mod:`.transcoder_step` holds the loss. Inputs and outputs are scaled per layer to mean norm
``sqrt(d_model)`` for training, and the scales are folded into the weights at the end.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from interp import distributed
from interp.sae.training.data import RowSource
from interp.sae.training.state import TrainState
from interp.sae.training.trainer import Run, TrainSettings
from interp.sae.training.transcoder_step import TranscoderStep
from interp.sae.transcoder import CrossLayerTranscoder, Transcoder, TranscoderSet

KINDS = ("transcoder", "skip-transcoder", "clt")
_ACTIVATION = {"standard": "relu", "jumprelu": "jumprelu", "topk": "topk", "batchtopk": "batchtopk"}


def transcoder_hooks(layers: list[int], input_site: str, output_site: str) -> list[str]:
    """The hooks a training store must hold, in the row order training reads: every input, then every output."""
    return [f"blocks.{i}.{input_site}" for i in layers] + [f"blocks.{i}.{output_site}" for i in layers]


def _rows(
    source: Any, layers: list[int] | None, input_site: str, output_site: str
) -> tuple[RowSource, list[int]]:
    if isinstance(source, tuple):
        if len(source) != 2 or not all(isinstance(t, torch.Tensor) for t in source):
            raise TypeError("a tensor source is a pair (inputs, outputs), each [rows, n_layers, d_model]")
        x, y = (t if t.ndim == 3 else t[:, None] for t in source)
        if x.shape != y.shape:
            raise ValueError(f"inputs {tuple(x.shape)} and outputs {tuple(y.shape)} differ in shape")
        layers = list(range(x.shape[1])) if layers is None else list(layers)
        if len(layers) != x.shape[1]:
            raise ValueError(f"layers={layers} but the tensors hold {x.shape[1]} layers")
        rows = torch.cat([x.flatten(1), y.flatten(1)], dim=1)  # [rows, 2 * n * d]
        return RowSource(rows, transcoder_hooks(layers, input_site, output_site)), layers
    names = getattr(source, "hook_names", None)
    if names is None:
        raise TypeError(
            f"source must be an ActivationStore or (inputs, outputs) tensors, got {type(source).__name__}"
        )
    if layers is None:
        layers = sorted({int(n.split(".")[1]) for n in names if n.startswith("blocks.")})
    hooks = transcoder_hooks(layers, input_site, output_site)
    missing = [h for h in hooks if h not in names]
    if missing:
        side = "output" if missing[0].endswith(output_site) else "input"
        raise ValueError(
            f"the store lacks {missing[0]!r}, the {side} hook of layer {missing[0].split('.')[1]}; cache every "
            f"layer's input and output together (it holds {names})"
        )
    return RowSource(source, hooks), layers


class TranscoderJob:
    """What is particular to training transcoders (see :class:`~.trainer.Run`)."""

    desc = "train transcoders"

    def __init__(
        self, settings: TrainSettings, kind: str, layers: list[int], sites: tuple[str, str], rows: RowSource
    ):
        self.s, self.kind, self.layers, self.sites, self.rows = settings, kind, layers, sites, rows
        self.d_model = rows.d_in // (2 * len(layers))

    def n_features(self) -> int:
        return len(self.layers) * self.s.d_sae

    def batch_scale(self, scale: list[float]) -> torch.Tensor:
        """``[2 * n * d_model]``: each layer's input and output scale, repeated across its columns."""
        return torch.tensor(scale, dtype=torch.float32).repeat_interleave(self.d_model)

    def start(self, sample: torch.Tensor) -> tuple[TranscoderStep, list[float], list[float]]:
        s, n, d, f = self.s, len(self.layers), self.d_model, self.s.d_sae
        parts = sample.reshape(sample.shape[0], 2 * n, d)  # [rows, inputs then outputs, d]
        norms = parts.norm(dim=-1).mean(0).clamp(min=1e-12)  # [2n]
        scale = (math.sqrt(d) / norms).tolist() if s.normalize else [1.0] * (2 * n)
        scaled = parts * torch.tensor(scale)[None, :, None]
        y = scaled[:, n:]
        variance = (y - y.mean(0)).pow(2).sum(-1).mean(0).clamp(min=1e-12).tolist()  # [n]
        g = torch.Generator().manual_seed(s.seed)
        w_enc = torch.randn(n, f, d, generator=g)
        w_enc /= w_enc.norm(dim=-1, keepdim=True)
        b_dec = y.mean(0) if s.b_dec_init != "zeros" else torch.zeros(n, d)
        common: dict[str, Any] = dict(
            activation=_ACTIVATION[s.architecture],
            k=s.k if s.architecture in ("topk", "batchtopk") else None,
            threshold=torch.full((n, f), s.jumprelu_init_threshold) if s.architecture == "jumprelu" else None,
            W_skip=torch.zeros(n, d, d) if self.kind == "skip-transcoder" else None,
            input_site=self.sites[0],
            output_site=self.sites[1],
        )
        if self.kind == "clt":
            w_dec = [torch.randn(f, n - i, d, generator=g) for i in range(n)]
            w_dec = [w / w.flatten(1).norm(dim=-1)[:, None, None] for w in w_dec]
            tc: Transcoder = CrossLayerTranscoder(
                w_enc, w_dec, torch.zeros(n, f), b_dec, decoder_reader=None, **common
            )
        else:
            w_dec = torch.randn(n, f, d, generator=g)
            w_dec /= w_dec.norm(dim=-1, keepdim=True)
            tc = TranscoderSet(w_enc, w_dec, torch.zeros(n, f), b_dec, layers=self.layers, **common)
        if tc.thresholds is not None:
            tc.thresholds.requires_grad_(False)
        return TranscoderStep(tc, s, variance), scale, variance

    @torch.no_grad()
    def finish(self, step: TranscoderStep, state: TrainState, record: dict[str, Any]) -> Transcoder:
        tc, n = step.tc, len(self.layers)
        scale_in = torch.tensor(state.scale[:n])
        scale_out = torch.tensor(state.scale[n:])
        if hasattr(step, "log_threshold"):
            tc.thresholds.copy_(step.log_threshold.exp())
            tc.thresholds.requires_grad_(True)
        tc.W_enc.mul_(scale_in[:, None, None])  # encoders read unscaled inputs; features are unchanged
        if isinstance(tc, CrossLayerTranscoder):
            for src, w in enumerate(tc.W_dec):
                w.div_(scale_out[src:, None])
        else:
            tc.W_dec.div_(scale_out[:, None, None])
        tc.b_dec.div_(scale_out[:, None])
        if tc.W_skip is not None:
            tc.W_skip.mul_((scale_in / scale_out)[:, None, None])
        tc.metadata["training"] = {**record, "kind": self.kind, "layers": self.layers}
        return tc


def train_transcoders(
    source: Any,
    *,
    kind: str = "transcoder",
    d_transcoder: int,
    layers: list[int] | None = None,
    input_site: str = "ln2.hook_normalized",
    output_site: str = "hook_mlp_out",
    architecture: str = "topk",
    k: int | None = None,
    lr: float | None = None,
    tokens: int | None = None,
    batch_size: int = 4096,
    seed: int = 0,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    progress: bool = True,
    **options: Any,
) -> Transcoder:
    """Train transcoders on a model's MLP inputs and outputs and return them (scales folded in).

    Args:
        source: an :class:`~interp.store.ActivationStore` holding ``blocks.L.{input_site}`` and
            ``blocks.L.{output_site}`` for every layer trained, or a pair ``(inputs, outputs)`` of tensors
            ``[rows, n_layers, d_model]``.
        kind: ``transcoder`` (per layer), ``skip-transcoder`` (per layer with a linear skip) or ``clt``.
        d_transcoder: features per layer.
        layers: the layers to train (default: every layer the store holds; a CLT's must be ``0..n-1``).
        input_site, output_site: the hooks inside a block read and written.
        architecture: ``topk``, ``batchtopk``, ``standard`` (ReLU + L1) or ``jumprelu``.
        k, lr, tokens, batch_size, seed, checkpoint_dir, checkpoint_every, progress, **options: as for
            :func:`interp.sae.train`.

    Returns:
        A :class:`TranscoderSet` or :class:`CrossLayerTranscoder`; ``tc.metadata["training"]`` holds the
        settings and the loss history.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; expected one of {list(KINDS)}")
    settings = TrainSettings(
        d_sae=d_transcoder,
        architecture=architecture,
        k=k,
        lr=lr,
        tokens=tokens,
        batch_size=batch_size,
        seed=seed,
        checkpoint_every=checkpoint_every,
        **options,
    )
    rows, layers = _rows(source, layers, input_site, output_site)
    if kind == "clt" and layers != list(range(len(layers))):
        raise ValueError(f"a CLT spans every layer 0..n-1 of the model; layers={layers}")
    job = TranscoderJob(settings, kind, layers, (input_site, output_site), rows)
    label = f"|{kind}|{layers}|{input_site}|{output_site}"
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None
    return Run(settings, rows, folder, job, label).execute(progress and distributed.rank() == 0)
