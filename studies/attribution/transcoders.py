"""The study's transcoders: one per layer, trained on the corpus or reused from a cache, and their quality.

The cache is a folder per key: the key hashes the model (its name and config), the corpus (its source and the
passages' text) and every training setting, so a run with other settings or data never reuses a set trained
for different ones. The folder holds the transcoders in circuit-tracer's format and the training's record.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from interp.sae import evaluate, load_transcoders, save_transcoders, train
from interp.sae.training.kinds import transcoder_hooks

INPUT_SITE, OUTPUT_SITE = "ln2.hook_normalized", "hook_mlp_out"


@dataclass(frozen=True)
class TrainingSettings:
    """What decides a transcoder set, besides the model and the corpus (part of the cache key)."""

    context: int
    d_transcoder: int
    k: int
    epochs: int
    batch_size: int
    seed: int


@dataclass(frozen=True)
class Trained:
    """A transcoder set and where it came from."""

    transcoders: Any
    folder: Path
    reused: bool
    seconds: float  # training (or loading) wall time
    n_rows: int  # training rows per hook
    history: list[dict]


def cache_key(model: Any, texts: list[str], source: str, settings: TrainingSettings) -> str:
    """A short hash of the model, the corpus and the settings."""
    h = hashlib.sha256()
    h.update(json.dumps(asdict(model.cfg), sort_keys=True, default=str).encode())
    h.update(source.encode())
    for text in texts:
        h.update(text.encode())
        h.update(b"\0")
    h.update(json.dumps(asdict(settings), sort_keys=True).encode())
    return h.hexdigest()[:16]


def split_windows(model: Any, texts: list[str], context: int) -> tuple[list, list]:
    """The corpus cut into windows of ``context`` tokens, in batches; the last 5% (at least one) held out."""
    from interp.store import windows

    batches = windows(model, texts, context, 16)
    n_held = max(1, len(batches) // 20)
    return batches[:-n_held], batches[-n_held:]


def trained_transcoders(
    model: Any, texts: list[str], source: str, settings: TrainingSettings, cache: Path, progress: bool
) -> Trained:
    """Per-layer TopK transcoders of every layer, from ``cache`` when a set with the same key is there."""
    from interp.store import cache_activations

    folder = cache / f"transcoders-{cache_key(model, texts, source, settings)}"
    record = folder / "training.json"
    clock = time.perf_counter()
    if record.exists():
        tc = load_transcoders(folder / "transcoders", model=model)
        done = json.loads(record.read_text())
        return Trained(tc, folder, True, time.perf_counter() - clock, done["n_rows"], done["history"])
    layers = list(range(model.cfg.n_layers))
    train_batches, _ = split_windows(model, texts, settings.context)
    store_dir = folder / "activations"
    shutil.rmtree(store_dir, ignore_errors=True)
    hooks = transcoder_hooks(layers, INPUT_SITE, OUTPUT_SITE)
    store = cache_activations(model, train_batches, hooks, store_dir, progress=progress)
    tc = train(
        store,
        kind="transcoder",
        d_sae=settings.d_transcoder,
        k=settings.k,
        batch_size=settings.batch_size,
        tokens=settings.epochs * len(store),
        seed=settings.seed,
        min_position=1,
        progress=progress,
    )
    n_rows = len(store)
    shutil.rmtree(store_dir, ignore_errors=True)  # the activations are large; the transcoders are the result
    save_transcoders(tc, folder / "transcoders")
    history = tc.metadata.get("training", {}).get("history", [])
    record.write_text(json.dumps({"settings": asdict(settings), "n_rows": n_rows, "history": history}))
    tc = load_transcoders(folder / "transcoders", model=model)
    return Trained(tc, folder, False, time.perf_counter() - clock, n_rows, history)


QUALITY = [
    "layer", "hook", "activation", "d_transcoder", "n_tokens", "l0", "explained_variance", "fvu", "mse",
    "dead_fraction", "dense_fraction", "ce_clean", "ce_replacement", "ce_zero", "ce_recovered", "kl",
]  # fmt: skip
"""The columns of :func:`interp.sae.evaluate` the study reports."""


@torch.no_grad()
def quality(model: Any, tc: Any, held: list) -> pd.DataFrame:
    """Per-layer variance explained, L0, dead fraction, and the replacement model's CE recovered and KL, on the
    held-out windows (every row of the replacement columns is the same whole-model number)."""
    width = max(b[0].shape[1] for b in held)
    pad = lambda t: torch.nn.functional.pad(t, (0, width - t.shape[1]))  # noqa: E731 - right padding
    ids = torch.cat([pad(b[0]) for b in held])  # [windows, width]
    mask = torch.cat([pad(b[1]) for b in held])
    frame = evaluate(model, tc, ids, mask)
    return frame[QUALITY].reset_index(drop=True)
