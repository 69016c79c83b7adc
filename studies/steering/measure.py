"""The steering study's measurements: directions, flips and shifts, fluency cost, and continuations.

Every function takes a model and items and returns a DataFrame of per-item (or per-prompt) values; the
summaries with intervals are computed from those frames, so a report can show both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from interp.analysis import (
    Batch,
    SteeringVector,
    bootstrap_mean_interval,
    logit_difference,
    steering_sweep,
    steering_vectors,
)
from interp.analysis.stats import correct_tests, sign_flip_interval, sign_flip_test
from studies.data.load import twin_pairs
from studies.data.switch import SwitchSummary, summarise, switch_pair

FEMININE = frozenset({"she", "her", "herself", "hers"})
PLURAL = frozenset({"they", "their", "them", "themselves", "theirs"})
KINDS = {"gender": "she − he", "number": "they − he"}
"""The directions: feminine minus masculine pronoun prompts, and plural minus singular ones."""
LABELS = {
    "gender": ("the feminine pronoun (she, her, herself)", "the masculine one"),
    "number": ("the plural pronoun (they, their)", "the singular one"),
}
"""Each kind's label 0 and label 1 (``targets[0]`` and ``targets[1]``), as a sentence reads them."""
UNITS = {"direction": "the direction's own norm", "stream": "the stream's norm at that layer"}
"""What a scale of 1 means in each unit: the mean twin difference itself, or the mean norm of the stream at the
last prompt token at that layer (the same push, relative to what is already there, at every layer)."""


def kind_of(item) -> str | None:
    """``"gender"`` when the first target is feminine, ``"number"`` when it is plural, else ``None``."""
    if len(item.targets) != 2:
        return None
    first = item.targets[0].strip().lower()
    return "gender" if first in FEMININE else "number" if first in PLURAL else None


def contrast_pairs(items: Sequence, kind: str) -> list[tuple]:
    """Twin pairs of ``kind`` as ``(positive, negative)``: the twin whose answer is ``targets[0]`` first."""
    pairs = [(a, b) for a, b in twin_pairs(items) if kind_of(a) == kind and kind_of(b) == kind]
    return [(a, b) if a.answer == 0 else (b, a) for a, b in pairs]


def find_directions(
    model, items: Sequence, kind: str, layers: Sequence[int], hook: str, batch_size: int
) -> dict[int, SteeringVector]:
    """The mean difference at the last prompt token, positive minus negative twin, at each layer's ``hook``."""
    pairs = contrast_pairs(items, kind)
    if not pairs:
        raise ValueError(f"no {kind} twin pairs to build the {KINDS[kind]} direction from")
    names = [f"blocks.{layer}.{hook}" for layer in layers]
    found = steering_vectors(
        model,
        [p.prompt for p, _ in pairs],
        [n.prompt for _, n in pairs],
        names,
        "last",
        batch_size=batch_size,
    )
    return {layer: found[name] for layer, name in zip(layers, names, strict=True)}


def random_controls(
    directions: Mapping[int, SteeringVector], n_random: int, seed: int
) -> dict[tuple[int, int], SteeringVector]:
    """``n_random`` Gaussian directions per layer, each rescaled to the norm of that layer's direction."""
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for layer, vec in directions.items():
        for r in range(n_random):
            noise = torch.randn(vec.vector.shape, generator=generator)
            out[layer, r] = vec.with_vector(noise / noise.norm() * vec.vector.float().norm())
    return out


@torch.no_grad()
def stream_norms(
    model, items: Sequence, kind: str, layers: Sequence[int], hook: str, batch_size: int
) -> dict:
    """``{layer: mean L2 norm}`` of the stream at the last prompt token of the ``kind`` twins among ``items``
    (both twins of each pair), at each layer's ``hook``."""
    prompts = [x.prompt for pair in contrast_pairs(items, kind) for x in pair]
    names = [f"blocks.{layer}.{hook}" for layer in layers]
    totals = dict.fromkeys(layers, 0.0)
    for start in range(0, len(prompts), batch_size):
        ids, mask = model.to_tokens(prompts[start : start + batch_size], padding_side="left")
        _, cache = model.run_with_cache(ids, mask, names_filter=names)
        for layer, name in zip(layers, names, strict=True):
            totals[layer] += float(cache[name][:, -1].float().norm(dim=-1).sum())  # [batch] at the last token
    return {layer: total / len(prompts) for layer, total in totals.items()}


def in_stream_units(vectors: Mapping, norms: Mapping[int, float]) -> dict:
    """Each vector rescaled to the stream's mean norm at its layer (the key, or its first element for a random
    control keyed ``(layer, draw)``), so that scale ``s`` adds ``s`` times that norm along it. A vector of zero
    norm (a layer where the twins do not differ) has no direction to rescale and is left out."""
    out = {}
    for key, vec in vectors.items():
        layer = key[0] if isinstance(key, tuple) else key
        if vec.norm > 0:
            out[key] = vec.with_vector((vec.vector.float() / vec.norm * norms[layer]).to(vec.vector.dtype))
    return out


def unsteered_switch(frame: pd.DataFrame, items: Sequence, kind: str, seed: int) -> SwitchSummary | None:
    """The unsteered model's switch sensitivity and bias (:mod:`studies.data.switch`) on the held-out ``kind``
    twin pairs, from the flip sweep's unsteered values (``targets[0] - targets[1]`` per item); ``None`` when
    no pair has both twins in the sweep."""
    base = frame.drop_duplicates("id").set_index("id")["base"]
    pairs = [(a, b) for a, b in contrast_pairs(items, kind) if a.id in base.index and b.id in base.index]
    if not pairs:
        return None
    scored = [switch_pair(float(base[a.id]), float(base[b.id]), 0) for a, b in pairs]
    groups = [a.schema_id or a.id for a, _ in pairs]
    return summarise(scored, groups, labels=LABELS[kind], unit="logits", seed=seed)


def compare_to_random(frame: pd.DataFrame, units: str, seed: int) -> tuple[pd.DataFrame, object]:
    """Per kind, layer and scale: the direction's shift toward the other pronoun minus its random controls'
    mean shift, paired by item, with a sign-flip p-value and interval over schemas (a schema's twins flipped
    together); Holm's correction over every comparison of ``frame`` (the layer profile a reader scans).

    Returns the table (``diff, diff_low, diff_high, p, p_holm, rejected``) and the :class:`Correction`."""
    rows = []
    for (kind, layer, scale), part in frame.groupby(["kind", "layer", "scale"], sort=True):
        direction = part[~part.control].set_index("item")["shift"]
        random = part[part.control].groupby("item")["shift"].mean()
        items = direction.index.intersection(random.index)
        diff = (direction.loc[items] - random.loc[items]).to_numpy()  # [item]
        schemas = part.drop_duplicates("item").set_index("item").loc[items, "schema"].to_numpy()
        interval = sign_flip_interval(diff, schemas, seed=seed)
        rows.append(
            {
                "units": units,
                "kind": kind,
                "layer": int(layer),
                "scale": float(scale),
                "items": len(items),
                "schemas": interval.n_groups,
                "diff": interval.mean,
                "diff_low": interval.low,
                "diff_high": interval.high,
                "p": sign_flip_test(diff, 0.0, groups=schemas, seed=seed),
            }
        )
    table = pd.DataFrame(rows)
    correction = correct_tests(
        f"direction against random, shift per item, every kind, layer and scale in units of {UNITS[units]}",
        table["p"].tolist(),
    )
    table["p_holm"] = correction.adjusted
    table["rejected"] = correction.rejected
    return table, correction


def target_ids(model, items: Sequence) -> torch.Tensor:
    """``[item, 2]`` token ids of each item's two targets; each must be a single token."""
    seen: dict[str, int] = {}
    rows = []
    for item in items:
        row = []
        for target in item.targets[:2]:
            if target not in seen:
                ids = model.to_tokens(target, prepend_bos=False).ids[0].tolist()
                if len(ids) != 1:
                    raise ValueError(
                        f"item {item.id!r}: target {target!r} is {len(ids)} tokens for this tokenizer; "
                        "the study compares single-token pronouns"
                    )
                seen[target] = ids[0]
            row.append(seen[target])
        rows.append(row)
    return torch.tensor(rows, dtype=torch.long)


def _vectors(directions, controls) -> dict[str, SteeringVector]:
    out = {f"direction/{layer}": v for layer, v in directions.items()}
    out.update({f"random{r}/{layer}": v for (layer, r), v in controls.items()})
    return out


def flip_sweep(
    model,
    items: Sequence,
    kind: str,
    directions: Mapping[int, SteeringVector],
    controls: Mapping[tuple[int, int], SteeringVector],
    scales: Sequence[float],
    batch_size: int,
    progress: bool = False,
) -> pd.DataFrame:
    """Each held-out item steered at its last token toward the pronoun that does not agree.

    Items whose answer is ``targets[1]`` get ``+scale`` times the direction, the others ``-scale``. Returns
    one row per item and condition: ``kind, layer, control, scale, item, schema, base, value, shift,
    correct, flipped``, where ``value`` is ``logit(targets[0]) - logit(targets[1])``, ``shift`` the change
    toward the wrong pronoun, ``correct`` whether the unsteered model preferred the agreeing one, and
    ``flipped`` whether steering made a correct item prefer the other.
    """
    test = [item for item in items if kind_of(item) == kind]
    ids = target_ids(model, test)
    vectors = _vectors(directions, controls)
    frames = []
    for answer, sign in ((1, 1.0), (0, -1.0)):
        group = [i for i, item in enumerate(test) if item.answer == answer]
        if not group:
            continue
        targets = ids[group]

        frame = steering_sweep(
            model,
            [test[i].prompt for i in group],
            vectors,
            [sign * s for s in scales],
            logit_difference,
            positions="last",
            labels={"answer": targets[:, 0], "foil": targets[:, 1]},
            batch_size=batch_size,
            progress=progress,
        )
        frame["item"] = [group[p] for p in frame.prompt]
        frame["sign"] = sign
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    base = frame[frame.vector == "none"].set_index("item").value
    frame = frame[frame.vector != "none"].copy()
    frame["control"] = [v.split("/")[0] != "direction" for v in frame.vector]
    frame["layer"] = [int(v.split("/")[1]) for v in frame.vector]
    frame["scale"] = frame.scale.abs()
    frame["base"] = base.loc[frame.item].to_numpy()
    frame["shift"] = frame.sign * (frame.value - frame.base)
    frame["correct"] = frame.sign * frame.base < 0
    frame["flipped"] = frame.correct & (frame.sign * frame.value > 0)
    frame["kind"] = kind
    frame["schema"] = [test[i].schema_id or test[i].id for i in frame.item]
    frame["id"] = [test[i].id for i in frame.item]
    columns = ["kind", "layer", "control", "vector", "scale", "item", "id", "schema", "base", "value"]
    return frame[[*columns, "shift", "correct", "flipped"]].reset_index(drop=True)


def bootstrap_mean(values: np.ndarray, groups: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """95% interval of the mean over whole groups (twins of a schema together): percentile bootstrap, the
    t-interval below 10 groups (:func:`bootstrap_mean_interval`)."""
    if len(values) == 0:
        return math.nan, math.nan
    return bootstrap_mean_interval(values, n_boot, seed, groups=groups)[1:]


def summarise_flips(frame: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Per kind, layer, control and scale: flip fraction of the correct items and the mean shift toward the wrong
    pronoun, each with a 95% bootstrap interval over schemas (a schema's twins resampled together)."""
    rows = []
    keys = ["kind", "layer", "control", "scale"]
    for (kind, layer, control, scale), part in frame.groupby(keys, sort=True):
        correct = part[part.correct]
        flips, n = int(correct.flipped.sum()), len(correct)
        low, high = bootstrap_mean(correct.flipped.to_numpy(float), correct.schema.to_numpy(), n_boot, seed)
        s_low, s_high = bootstrap_mean(part["shift"].to_numpy(), part.schema.to_numpy(), n_boot, seed)
        rows.append(
            {
                "kind": kind,
                "layer": int(layer),
                "control": "random" if control else "direction",
                "scale": float(scale),
                "n_correct": n,
                "flip": flips / n if n else math.nan,
                "flip_low": low,
                "flip_high": high,
                "shift": float(part["shift"].mean()),
                "shift_low": s_low,
                "shift_high": s_high,
            }
        )
    return pd.DataFrame(rows)


@torch.no_grad()
def fluency_cost(
    model,
    neutral: Sequence[str],
    kind: str,
    directions: Mapping[int, SteeringVector],
    controls: Mapping[tuple[int, int], SteeringVector],
    scales: Sequence[float],
    batch_size: int,
    progress: bool = False,
) -> pd.DataFrame:
    """KL(unsteered || steered) of the next token after each neutral prompt, steering its last token.

    Returns one row per prompt and condition: ``kind, layer, control, scale, prompt, kl`` (nats).
    """
    ids, mask = model.to_tokens(list(neutral), padding_side="left")
    base = model(ids, mask)[:, -1].float().log_softmax(-1)  # [prompt, d_vocab]

    def metric(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        reference = base.to(logits.device)[batch.labels["prompt"]]
        kl = (reference.exp() * (reference - logits.float().log_softmax(-1))).sum(-1)
        return kl.clamp(min=0.0)  # >= 0; float rounding can dip a hair below when nothing changed

    frame = steering_sweep(
        model,
        list(neutral),
        _vectors(directions, controls),
        list(scales),
        metric,
        positions="last",
        baseline=False,
        batch_size=batch_size,
        progress=progress,
    )
    frame["control"] = [v.split("/")[0] != "direction" for v in frame.vector]
    frame["layer"] = [int(v.split("/")[1]) for v in frame.vector]
    frame["kind"] = kind
    return frame.rename(columns={"value": "kl"})[["kind", "layer", "control", "scale", "prompt", "kl"]]


def summarise_fluency(frame: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Mean KL per kind, layer, control and scale with a 95% bootstrap interval over prompts."""
    rows = []
    for (kind, layer, control, scale), part in frame.groupby(["kind", "layer", "control", "scale"]):
        low, high = bootstrap_mean(part.kl.to_numpy(), part.prompt.to_numpy(), n_boot, seed)
        rows.append(
            {
                "kind": kind,
                "layer": int(layer),
                "control": "random" if control else "direction",
                "scale": float(scale),
                "kl": float(part.kl.mean()),
                "kl_low": low,
                "kl_high": high,
            }
        )
    return pd.DataFrame(rows)


@torch.no_grad()
def continuations(
    model, prompts: Sequence[str], conditions: Mapping[str, list], new_tokens: int
) -> pd.DataFrame:
    """Greedy continuations of ``prompts`` under each condition (``{label: fwd_hooks}``), and their
    perplexity under the unsteered model (how fluent the text is, judged by the model without the edit)."""
    rows = []
    for label, hooks in conditions.items():
        out = model.generate(list(prompts), new_tokens, fwd_hooks=hooks)
        logits = model(out.tokens, out.mask).float().log_softmax(-1)  # [batch, pos, d_vocab], unsteered
        width = max(out.prompt_lengths)  # left-padded: the prompts fill the first columns
        for row, prompt in enumerate(prompts):
            new = out.new_tokens[row]
            columns = torch.arange(width, width + len(new))
            nll = -logits[row, columns - 1, torch.tensor(new, dtype=torch.long)] if new else torch.zeros(0)
            rows.append(
                {
                    "condition": label,
                    "prompt": prompt,
                    "text": out.text[row],
                    "n_tokens": len(new),
                    "perplexity": float(nll.mean().exp()) if len(new) else math.nan,
                }
            )
    return pd.DataFrame(rows)
