"""What differs between the kinds of dictionary a training run makes: the rows read, the initial dictionary,
and the finished one.

A run (:class:`~.trainer.Run`) is the same loop, step (:class:`~.step.DictionaryStep`) and checkpoints for every
kind; a job holds the rest:

- :class:`SAEJob`: rows of one hook; decoder rows random unit vectors and the encoder their transpose, ``b_dec``
  at the rows' geometric median (or mean), inputs scaled to mean norm ``sqrt(d_in)``; the scale folded into the
  finished :class:`~interp.sae.SAE` (a JumpReLU's thresholds and a BatchTopK's inference threshold set);
- :class:`TranscoderJob`: every trained layer's input and output from one forward (an activation store holding
  each layer's two hooks, or two tensors), so one pass over the data feeds every layer; encoders and decoders
  random, ``b_dec`` at the outputs' mean, inputs and outputs scaled per layer; the scales folded into the
  finished :class:`~interp.sae.TranscoderSet` or :class:`~interp.sae.CrossLayerTranscoder`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from interp.sae.config import SAEConfig
from interp.sae.module import SAE
from interp.sae.training.data import RowSource
from interp.sae.training.state import TrainState, geometric_median, initial_weights
from interp.sae.training.step import DictionaryStep
from interp.sae.transcoder import CrossLayerTranscoder, Transcoder, TranscoderSet

KINDS = ("sae", "transcoder", "skip-transcoder", "clt")
"""What a run trains: an SAE at one hook, or transcoders from each layer's input to its output: per layer,
per layer with a linear skip, or cross-layer."""
_ACTIVATION = {"standard": "relu", "jumprelu": "jumprelu", "topk": "topk", "batchtopk": "batchtopk"}


def job_for(
    kind: str,
    settings: Any,
    source: Any,
    *,
    hook_name: str | None = None,
    layers: list[int] | None = None,
    input_site: str | None = None,
    output_site: str | None = None,
) -> tuple[SAEJob | TranscoderJob, RowSource, str]:
    """``(job, rows, label)`` for a run of ``kind`` on ``source``; ``label`` is what a checkpoint must match
    beyond the settings and the data (a transcoder's kind, layers and hooks).

    Raises:
        ValueError: an unknown kind; an SAE given layers or sites, transcoders given a hook; a CLT not over
            every layer from 0; rows that do not fit the kind (from the row source).
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; expected one of {list(KINDS)}")
    if kind == "sae":
        given = [
            name
            for name, v in (("layers", layers), ("input_site", input_site), ("output_site", output_site))
            if v is not None
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} are for transcoders (kind='transcoder', 'skip-transcoder' or 'clt'); an SAE "
                "reads one hook, hook_name"
            )
        rows = RowSource(source, hook_name, min_position=settings.min_position)
        return SAEJob(settings, rows), rows, ""
    if hook_name is not None:
        raise ValueError(
            f"hook_name={hook_name!r} is for an SAE; kind={kind!r} reads each layer's input_site and writes its "
            "output_site"
        )
    sites = (input_site or "ln2.hook_normalized", output_site or "hook_mlp_out")
    rows, layers = transcoder_rows(source, layers, *sites, min_position=settings.min_position)
    if kind == "clt" and layers != list(range(len(layers))):
        raise ValueError(f"a CLT spans every layer 0..n-1 of the model; layers={layers}")
    label = f"|{kind}|{layers}|{sites[0]}|{sites[1]}"
    return TranscoderJob(settings, kind, layers, sites, rows), rows, label


class SAEJob:
    """What is particular to training an SAE: the initial dictionary and the finished SAE."""

    desc = "train sae"

    def __init__(self, settings: Any, rows: RowSource) -> None:
        self.s, self.rows = settings, rows

    def n_features(self) -> int:
        return self.s.d_sae

    def start(self, sample: torch.Tensor) -> tuple[DictionaryStep, float, float]:
        """``(step, scale, variance)`` from a sample of rows."""
        s, d_in = self.s, self.rows.d_in
        if not bool(torch.isfinite(sample).all()):
            bad = int((~torch.isfinite(sample)).any(-1).sum())
            raise ValueError(
                f"{bad} of the first {len(sample)} training rows hold NaN or infinite values; an SAE cannot be "
                "fitted to them: find where the activations overflow (a float16 model?) and cache them again"
            )
        scale = math.sqrt(d_in) / float(sample.norm(dim=-1).mean().clamp(min=1e-12)) if s.normalize else 1.0
        sample = sample * scale
        variance = float((sample - sample.mean(0)).pow(2).sum(-1).mean().clamp(min=1e-12))
        cfg = SAEConfig(
            d_in=d_in,
            d_sae=s.d_sae,
            architecture=s.architecture,
            k=s.k,
            hook_name=self.rows.hook_name,
            model_name=self.rows.model_name,
        )
        sae = SAE(cfg)
        w_enc, w_dec = initial_weights(d_in, s.d_sae, s.seed)
        with torch.no_grad():
            sae.W_enc.copy_(w_enc)
            sae.W_dec.copy_(w_dec)
            if s.b_dec_init == "geometric_median":
                sae.b_dec.copy_(geometric_median(sample))
            elif s.b_dec_init == "mean":
                sae.b_dec.copy_(sample.mean(0))
        if cfg.has_threshold:
            sae.threshold.requires_grad_(False)
        return DictionaryStep(sae, s, variance), scale, variance

    def finish(self, step: DictionaryStep, state: TrainState, record: dict[str, Any]) -> SAE:
        sae = step.module
        with torch.no_grad():
            if sae.cfg.architecture == "jumprelu":
                sae.threshold.copy_(step.log_threshold.exp().reshape(sae.threshold.shape))
            elif sae.cfg.architecture == "batchtopk":  # run as a JumpReLU at the threshold training cut at
                sae.threshold.fill_(float(state.batch_threshold.reshape(-1)[0]))
        if sae.cfg.has_threshold:
            sae.threshold.requires_grad_(True)
        sae.fold_activation_scale(state.scale)
        sae.cfg.metadata["training"] = record
        return sae


def transcoder_hooks(layers: list[int], input_site: str, output_site: str) -> list[str]:
    """The hooks a training store must hold, in the row order training reads: every input, then every output."""
    return [f"blocks.{i}.{input_site}" for i in layers] + [f"blocks.{i}.{output_site}" for i in layers]


def transcoder_rows(
    source: Any, layers: list[int] | None, input_site: str, output_site: str, min_position: int = 0
) -> tuple[RowSource, list[int]]:
    """The training rows of transcoders (every layer's input, then every layer's output) and the layers they
    hold: from a pair of tensors, or from a store (its rows from ``min_position`` of each item on, as an SAE's)."""
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
    return RowSource(source, hooks, min_position=min_position), layers


class TranscoderJob:
    """What is particular to training transcoders: the initial set or CLT, each layer's scales, and the
    finished dictionary with the scales folded in."""

    desc = "train transcoders"

    def __init__(self, settings: Any, kind: str, layers: list[int], sites: tuple[str, str], rows: RowSource):
        self.s, self.kind, self.layers, self.sites, self.rows = settings, kind, layers, sites, rows
        self.d_model = rows.d_in // (2 * len(layers))

    def n_features(self) -> int:
        return len(self.layers) * self.s.d_sae

    def batch_scale(self, scale: list[float]) -> torch.Tensor:
        """``[2 * n * d_model]``: each layer's input and output scale, repeated across its columns."""
        return torch.tensor(scale, dtype=torch.float32).repeat_interleave(self.d_model)

    def start(self, sample: torch.Tensor) -> tuple[DictionaryStep, list[float], list[float]]:
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
        return DictionaryStep(tc, s, variance), scale, variance

    @torch.no_grad()
    def finish(self, step: DictionaryStep, state: TrainState, record: dict[str, Any]) -> Transcoder:
        tc, n = step.module, len(self.layers)
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
