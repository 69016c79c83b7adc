"""Planted features and a folder of their feature files, written as the dashboards write them.

Each planted feature fires exactly on one closed class of words (digits, colours, animals) and nowhere else,
with an activation drawn at random. Texts are made of filler words, with words of *every* class scattered at
random (each context holds each other class's words with probability 1/2, independent of the feature), so that
an explanation of another class says nothing about where this feature fires: a scorer that follows a shuffled
explanation answers independently of the truth. Contexts are long (``LENGTH`` tokens) with the feature's words
near the chosen token, so that runs of 32 tokens where the feature is zero exist in every file (the
non-activating examples).

The files follow circuit-tracer 0.5's ``frontend/feature_models.py`` (``Model``), with every field; the index
lists ``layer``, ``feature``, ``featureIndex`` and ``density``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from interp.sae.explanations import FeatureId

FILLER = (
    "the of and a to in is was that for on with as by at from it his her they this which be were had "
    "not are but have one all their been has there when who will more no if out so said what up its about "
    "into than them can only other new some could time these two may then do first any my now such like our "
    "over man me even most made after also did many before must through back years where much your way well "
    "down should because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last might us great "
    "old year off come since against go came right used take three"
).split()
CLASSES: dict[str, tuple[str, ...]] = {
    "digits": tuple(str(n) for n in range(0, 100, 3)),
    "colours": ("red", "blue", "green", "yellow", "purple", "orange", "grey", "pink", "brown", "black"),
    "animals": ("dog", "cat", "horse", "sheep", "goat", "rabbit", "fox", "owl", "mouse", "deer"),
}
EXPLANATIONS = {
    "digits": "numbers written in digits",
    "colours": "names of colours",
    "animals": "names of animals",
}
LENGTH = 96
SCAN = "planted"


@dataclass(frozen=True)
class Planted:
    """A planted feature: its id and the class of words it fires on."""

    id: FeatureId
    kind: str

    @property
    def explanation(self) -> str:
        return EXPLANATIONS[self.kind]

    def fires(self, token: str) -> bool:
        return token.strip() in CLASSES[self.kind]


PLANTED = (
    Planted(FeatureId(0, 5), "digits"),
    Planted(FeatureId(1, 2), "colours"),
    Planted(FeatureId(2, 7), "animals"),
)


def word_rule(explanation: str) -> Callable[[str], bool] | None:
    """Which words an explanation names (for the rule scorer): the class whose explanation it is."""
    for kind, text in EXPLANATIONS.items():
        if explanation.strip().lower() == text:
            return lambda word, kind=kind: word.strip() in CLASSES[kind]
    return None


def context(rng: random.Random, feature: Planted) -> tuple[list[str], list[float], int]:
    """One example: tokens, activations, and the chosen token (the one with the largest activation)."""
    words = [rng.choice(FILLER) for _ in range(LENGTH)]
    centre = rng.randrange(40, 60)
    for offset in sorted(rng.sample(range(-3, 4), rng.randint(1, 3))):
        words[centre + offset] = rng.choice(CLASSES[feature.kind])
    for kind, members in CLASSES.items():
        if kind != feature.kind and rng.random() < 0.5:
            for _ in range(rng.randint(1, 2)):  # placed anywhere, so also in the zero windows
                words[rng.randrange(LENGTH)] = rng.choice(members)
    tokens = [(" " if i else "") + w for i, w in enumerate(words)]
    acts = [round(rng.uniform(1.0, 10.0), 3) if feature.fires(t) else 0.0 for t in tokens]
    chosen = max(range(LENGTH), key=lambda i: acts[i])
    return tokens, acts, chosen


def feature_file(feature: Planted, n_examples: int = 60, n_quantiles: int = 4, seed: int = 0) -> dict:
    """A feature file in circuit-tracer's schema: ``n_examples`` contexts in ``n_quantiles`` quantiles by their
    largest activation, the top quantile first."""
    rng = random.Random(f"{seed}:{feature.id}")
    rows = sorted((context(rng, feature) for _ in range(n_examples)), key=lambda r: -max(r[1]))
    per = n_examples // n_quantiles
    quantiles = [
        {
            "quantile_name": "Top activations" if q == 0 else f"Subsample interval {q}",
            "examples": [
                {"tokens": t, "tokens_acts_list": a, "train_token_ind": i, "is_repeated_datapoint": False}
                for t, a, i in rows[q * per : (q + 1) * per]
            ],
        }
        for q in range(n_quantiles)
    ]
    acts = [a for _, row, _ in rows for a in row]
    active = [a for a in acts if a > 0]
    return {
        "transcoder_id": SCAN,
        "index": feature.id.feature,
        "examples_quantiles": quantiles,
        "top_logits": [" one", " two"],
        "bottom_logits": [" the", " of"],
        "act_min": min(active),
        "act_max": max(active),
        "quantile_values": [sorted(active)[int(q * (len(active) - 1))] for q in (0.25, 0.5, 0.75, 1.0)],
        "histogram": [float(sum(1 for a in active if lo <= a < lo + 1)) for lo in range(1, 11)],
        "activation_frequency": len(active) / len(acts),
    }


def write_folder(root: Path, features: tuple[Planted, ...] = PLANTED, **kwargs) -> Path:
    """``root/features/planted/<featureIndex>.json`` for each feature, and ``root/index.json``."""
    scan = root / "features" / SCAN
    scan.mkdir(parents=True, exist_ok=True)
    index = []
    for feature in features:
        data = feature_file(feature, **kwargs)
        (scan / f"{feature.id.index}.json").write_text(json.dumps(data))
        index.append(
            {
                "layer": feature.id.layer,
                "feature": feature.id.feature,
                "featureIndex": feature.id.index,
                "density": data["activation_frequency"],
            }
        )
    (root / "index.json").write_text(json.dumps({"scan": SCAN, "features": index}))
    return root
